package topology

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// Moves run side by side (Engine.pace, MigrateParallel): a 3→4 scale-out moves slots from
// the three masters at once, here under a client's WAIT-acknowledged writes (MigrateServingOps
// is raised so that the writer does not put the moves at the serving pace, one at a time).
// These cases interrupt it while at least two moves are in flight, each source with slots
// open towards the new master:
//
//   - cancelled: the run's context is cancelled (as when the operator stops in the middle of
//     a pass): every round in flight is settled, so no slot is left open anywhere before the
//     next run, which finishes the scale-out;
//   - source-killed: one source master is killed (SIGKILL) and Redis fails its shard over to
//     the replica, which knows nothing of the open slots: the next runs close them and
//     finish.
//
// In both, every acknowledged write and every key of the dataset is readable at the end,
// and the cluster has its 4-master shape with no open slot.
func TestParallelMovesInterrupted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kill bool
	}{{"cancelled", false}, {"source-killed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newTestCluster(t, redistest.Options{AppendFsyncAlways: true}, Options{MigrateServingOps: 1 << 40})
			all, d := c.form(3, 2)
			ds := redistest.Dataset{Prefix: "pm", Keys: 30_000}
			redistest.Load(t, c.client(d), ds)
			all = append(all, c.addShards(1, 2)...)
			d = c.desired(1, all)
			wr := startAckWriter(t, c, d, "pmw")

			// Watch the three sources' own CLUSTER NODES lines: interrupt once two of them
			// migrate slots at the same time.
			sources := []*redistest.Node{c.nodes["s0"][0], c.nodes["s1"][0], c.nodes["s2"][0]}
			watch := make([]*redis.Client, len(sources))
			for i, n := range sources {
				watch[i] = n.Client()
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			interrupted := make(chan int, 1)
			go func() {
				defer close(interrupted)
				for ctx.Err() == nil {
					migrating := 0
					for _, cl := range watch {
						if migratingSlots(cl) > 0 {
							migrating++
						}
					}
					if migrating >= 2 {
						if tc.kill {
							sources[1].Kill()
						} else {
							cancel()
						}
						interrupted <- migrating
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
			_, err := c.engine.Reconcile(rctx, d, nil)
			rcancel()
			n, ok := <-interrupted
			if !ok {
				t.Fatalf("the run ended (%v) before two moves were in flight at once", err)
			}
			t.Logf("interrupted with %d sources migrating at once; the run returned %v", n, err)
			if err == nil {
				t.Fatal("the interrupted run returned no error")
			}
			if !tc.kill {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("error %v, want context.Canceled", err)
				}
				if open := openSlots(c.observe(d)); len(open) > 0 {
					t.Fatalf("open slots after a cancelled run: %v", open)
				}
			} else {
				// Redis fails the shard over to its replica; the killed node comes back
				// with its files, as a restarted pod does, and rejoins as a replica.
				waitFor(t, time.Minute, "s1's replica promoted", func() bool {
					for _, r := range c.nodes["s1"][1:] {
						if role, _ := r.Do("ROLE").([]any); len(role) > 0 && role[0] == "master" {
							return true
						}
					}
					return false
				})
				sources[1].Restart()
			}
			var res *Result
			waitFor(t, 3*time.Minute, "the scale-out finished", func() bool {
				r, err := c.tryReconcile(d, nil, time.Minute)
				res = r
				return err == nil && r != nil && r.Converged
			})
			// The writer goes on after the scale-out (at the full pace it may take a second),
			// so that finish has enough acknowledged writes to read back.
			waitFor(t, time.Minute, "150 acknowledged writes", func() bool {
				wr.mu.Lock()
				defer wr.mu.Unlock()
				return len(wr.acked) >= 150
			})
			wr.finish(t, c, d)
			c.assertShape(d, res)
			redistest.Verify(t, c.client(d), ds)
		})
	}
}

// migratingSlots counts the slots a node's own CLUSTER NODES line shows migrating.
func migratingSlots(cl *redis.Client) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	text, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return 0
	}
	recs, err := ParseClusterNodes(text)
	if err != nil {
		return 0
	}
	for _, r := range recs {
		if r.Flags.Myself {
			return len(r.Migrating)
		}
	}
	return 0
}
