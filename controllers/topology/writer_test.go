package topology

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// writer keeps writing fresh keys through a cluster client while a reconcile runs and
// remembers which writes Redis acknowledged: SET succeeded and, when replicas > 0, WAIT
// reported that many replicas have it (the guarantee a careful client relies on).
type writer struct {
	replicas   int
	stop, done chan struct{}
	mu         sync.Mutex
	acked      []string
}

// startWriter acknowledges a write when SET succeeds.
func startWriter(t *testing.T, c *testCluster, d Desired, prefix string) *writer {
	return startWriterWaiting(t, c, d, prefix, 0)
}

// startAckWriter acknowledges a write only after WAIT 1 confirmed a replica has it.
func startAckWriter(t *testing.T, c *testCluster, d Desired, prefix string) *writer {
	return startWriterWaiting(t, c, d, prefix, 1)
}

func startWriterWaiting(t *testing.T, c *testCluster, d Desired, prefix string, replicas int) *writer {
	w := &writer{replicas: replicas, stop: make(chan struct{}), done: make(chan struct{})}
	cc := c.client(d)
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			k := fmt.Sprintf("%s:%d", prefix, i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if w.write(ctx, cc, k) {
				w.mu.Lock()
				w.acked = append(w.acked, k)
				w.mu.Unlock()
			}
			cancel()
		}
	}()
	return w
}

// write sets k to itself and reports whether the write was acknowledged.
func (w *writer) write(ctx context.Context, cc *redis.ClusterClient, k string) bool {
	if w.replicas == 0 {
		return cc.Set(ctx, k, k, 0).Err() == nil
	}
	cl, err := cc.MasterForKey(ctx, k)
	if err != nil {
		return false
	}
	pipe := cl.Pipeline()
	set := pipe.Set(ctx, k, k, 0)
	wait := pipe.Do(ctx, "WAIT", w.replicas, 100)
	_, _ = pipe.Exec(ctx)
	n, _ := wait.Int64()
	return set.Err() == nil && n >= int64(w.replicas)
}

// finish stops the writer and checks every acknowledged write through a cluster client:
// at least 100 of them, none lost.
func (w *writer) finish(t *testing.T, c *testCluster, d Desired) {
	t.Helper()
	close(w.stop)
	<-w.done
	cc := c.client(d)
	lost := 0
	for _, k := range w.acked {
		if v, err := cc.Get(context.Background(), k).Result(); err != nil || v != k {
			lost++
		}
	}
	t.Logf("writer: %d writes acknowledged (WAIT %d), %d lost", len(w.acked), w.replicas, lost)
	if len(w.acked) < 100 || lost > 0 {
		t.Fatalf("%d acknowledged writes, %d lost", len(w.acked), lost)
	}
}
