package backup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Source is the node a shard's RDB is read from.
type Source struct {
	// Shard is the shard's name, Pod the node's, Role master or replica.
	Shard, Pod, Role string
	// Addr is the node's host:port.
	Addr string
	// Slots are the shard's slot ranges, for example ["0-5460"].
	Slots []string
}

// DefaultIdleTimeout bounds the silence of a node while it sends its RDB:
// it sends a newline every second while its child starts, then data.
const DefaultIdleTimeout = 60 * time.Second

// Take reads every source's RDB and uploads it to ShardKey(backupPath, i),
// all shards at once: every connection is opened and its SYNC answered
// before any upload starts, so the nodes fork their RDB children at about
// the same moment (each RDB is the node's data at its own fork; between
// shards they differ by the time the forks are apart). It returns the
// manifest's shards in sources' order (with each node's CLUSTER MYID) and
// the Redis version of the first source (INFO server); it writes no
// manifest. progress, when not nil, counts each shard's bytes as they are
// read (progress.Shard(i) for sources[i]). On an error every stream
// is closed and what was uploaded stays (a manifest-less backup is
// incomplete by definition).
func Take(ctx context.Context, store *Store, backupPath string, sources []Source, password string, idle time.Duration,
	progress *Progress) ([]ManifestShard, string, error) {
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	streams := make([]*RDBStream, len(sources))
	defer func() {
		for _, s := range streams {
			if s != nil {
				_ = s.Close()
			}
		}
	}()
	var (
		wg   sync.WaitGroup
		errs = make([]error, len(sources))
	)
	versions := make([]string, len(sources))
	ids := make([]string, len(sources))
	for i, src := range sources {
		wg.Go(func() {
			versions[i], ids[i], errs[i] = nodeInfo(ctx, src.Addr, password, idle)
			if errs[i] == nil {
				streams[i], errs[i] = DialRDB(ctx, src.Addr, password, idle)
			}
			if errs[i] != nil {
				errs[i] = fmt.Errorf("shard %s (pod %s): %w", src.Shard, src.Pod, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, "", err
	}
	out := make([]ManifestShard, len(sources))
	for i, src := range sources {
		wg.Go(func() {
			key := ShardKey(backupPath, i)
			var r io.Reader = streams[i]
			if progress != nil {
				r = &countingReader{r: r, total: progress.counter(i)}
			}
			up, err := store.PutStream(ctx, key, r)
			if err != nil {
				errs[i] = fmt.Errorf("shard %s (pod %s): %w", src.Shard, src.Pod, err)
				return
			}
			out[i] = ManifestShard{Name: src.Shard, Pod: src.Pod, NodeID: ids[i], Role: src.Role,
				Slots: src.Slots, ObjectKey: key, Size: up.Size, SHA256: up.SHA256}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, "", err
	}
	return out, versions[0], nil
}

// nodeInfo is redis_version (INFO server) and the node ID (CLUSTER MYID)
// of the node at addr.
func nodeInfo(ctx context.Context, addr, password string, timeout time.Duration) (version, id string, err error) {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: password, DialTimeout: timeout,
		ReadTimeout: timeout, WriteTimeout: timeout, MaxRetries: -1, PoolSize: 1, Protocol: 2, DisableIdentity: true})
	defer func() { _ = c.Close() }()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return "", "", fmt.Errorf("INFO server on %s: %w", addr, err)
	}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "redis_version:"); ok {
			version = v
		}
	}
	if version == "" {
		return "", "", fmt.Errorf("INFO server on %s has no redis_version", addr)
	}
	id, err = c.ClusterMyID(ctx).Result()
	if err != nil {
		return "", "", fmt.Errorf("CLUSTER MYID on %s: %w", addr, err)
	}
	return version, id, nil
}
