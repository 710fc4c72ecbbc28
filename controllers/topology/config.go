package topology

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ApplyConfig runs CONFIG SET with every key/value of cfg (one atomic CONFIG SET per node,
// Redis 7 takes several pairs) and then CONFIG REWRITE on every endpoint, concurrently, so a
// live change also survives restarts (CONFIG REWRITE needs the node's config file to be
// writable). Values are never logged, and values of secret-looking keys are
// masked in errors. Errors name the failing endpoints.
func (e *Engine) ApplyConfig(ctx context.Context, eps []Endpoint, cfg map[string]string) error {
	if len(cfg) == 0 {
		return nil
	}
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		if k == "" {
			return fmt.Errorf("%w: empty config key", ErrInvalidDesired)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := []any{"CONFIG", "SET"}
	for _, k := range keys {
		args = append(args, k, cfg[k])
	}
	for _, ep := range eps {
		if err := validateAddr(ep.Addr); err != nil {
			return fmt.Errorf("%w: endpoint %s: %w", ErrInvalidDesired, ep.Name, err)
		}
	}
	c := e.newConns()
	defer c.close()
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := &NodeView{Endpoint: ep}
			e.log.Info("Applying config", "node", ep.Name, "keys", strings.Join(keys, ","))
			err := e.do(ctx, c, n, args...)
			if err == nil {
				err = e.do(ctx, c, n, "CONFIG", "REWRITE")
			}
			if err != nil {
				errs[i] = fmt.Errorf("%s: %s", ep.Name, mask(err.Error(), configSecrets(cfg)))
				if errors.Is(err, ErrAuth) {
					errs[i] = fmt.Errorf("%w: %w", ErrAuth, errs[i])
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// configSecrets lists the values of cfg's secret-looking keys (…pass…, …auth…, …user…,
// case-insensitive), for mask.
func configSecrets(cfg map[string]string) []string {
	var out []string
	for k, v := range cfg {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "pass") || strings.Contains(lk, "auth") || strings.Contains(lk, "user") {
			out = append(out, v)
		}
	}
	return out
}
