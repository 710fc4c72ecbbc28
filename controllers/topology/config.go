package topology

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ApplyConfig runs CONFIG SET with every key/value of cfg on every endpoint, concurrently
// (one atomic CONFIG SET per node: Redis 7 takes several pairs). Nothing is written to the
// node's disk: a restart reads the rendered configuration, which the caller updates with
// the same values, and CONFIG REWRITE would also write requirepass and masterauth in plain
// text into the config file on the data volume. Values are never logged, and values of
// secret-looking keys are masked in errors. Errors name the failing endpoints.
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
			c.configChanged(ep.Addr) // a failed CONFIG SET may have applied too
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
