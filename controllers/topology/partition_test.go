package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

var currentEpoch = regexp.MustCompile(`cluster_current_epoch:(\d+)`)

func epochOf(n *redistest.Node) string {
	return currentEpoch.FindStringSubmatch(n.Do("CLUSTER", "INFO").(string))[1]
}

// settledEpoch waits until every node reports the same current epoch and returns it. A
// freshly formed cluster is not settled at once: nodes that are still empty masters with
// config epoch 0 when they meet resolve that collision by bumping the epoch (clusterHandle-
// ConfigEpochCollision in Redis 7.0's cluster.c), and the bump reaches the others by gossip.
func (c *testCluster) settledEpoch() string {
	var epoch string
	waitFor(c.t, 30*time.Second, "every node to agree on the current epoch", func() bool {
		epoch = ""
		for _, nodes := range c.nodes {
			for _, n := range nodes {
				e := epochOf(n)
				if epoch != "" && e != epoch {
					return false
				}
				epoch = e
			}
		}
		return true
	})
	return epoch
}

// deadAddr is a 127.0.0.1 address on which nobody listens.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// The asymmetric partition of issue 13: the engine cannot reach shard s0's master (its
// endpoint answers nobody), optionally its replica is cut from it too (iptables between the
// two nodes' own addresses, so the replica flags the master fail?), while the other masters
// and the clients still reach it. Running the engine (Reconcile, and the planned Failover a
// rolling update would ask for) for longer than the old forcing threshold, 6 node timeouts,
// promotes nobody: the master keeps its slots, the epoch does not move, and no write
// acknowledged after WAIT 1 is lost.
func TestAsymmetricPartitionNoForcedPromotion(t *testing.T) {
	t.Parallel()
	for _, cutReplica := range []bool{false, true} {
		t.Run(fmt.Sprintf("replicaCut=%v", cutReplica), func(t *testing.T) {
			c := newTestCluster(t, redistest.Options{OwnAddress: true}, Options{})
			all, d := c.form(3, 2)
			master, replica := c.nodes["s0"][0], c.nodes["s0"][1]
			masterID := c.observe(d).Node("s0-0").ID
			epoch := c.settledEpoch()

			w := startAckWriter(t, c, d, "a")
			cut := c.desired(1, all)
			cut.Shards[0].Nodes[0].Addr = deadAddr(t)
			if cutReplica {
				heal := redistest.Cut(t, master, replica)
				defer heal()
				waitFor(t, 30*time.Second, "the replica to flag its master", func() bool {
					r := c.observe(d).Node("s0-1").Lookup(masterID)
					return r != nil && r.Failing()
				})
			}
			start, waits := time.Now(), 0
			for time.Since(start) < 6*testNodeTimeout+7*time.Second {
				res, err := c.tryReconcile(cut, nil, 3*time.Second)
				if err == nil {
					t.Fatalf("Reconcile converged with the master unreachable: %s", res.Message)
				}
				if res != nil && strings.Contains(res.Message, "shard s0") {
					waits++
				}
			}
			c.assertNotPromoted(d, masterID)
			if waits == 0 {
				t.Fatal("the engine never reported waiting for shard s0")
			}
			for range 3 {
				if err := c.engine.Failover(context.Background(), cut, "s0", "s0-1"); !errors.Is(err, ErrNotReady) {
					t.Fatalf("planned failover with the master unreachable: %v, want ErrNotReady", err)
				}
			}
			c.assertNotPromoted(d, masterID)
			if got := epochOf(c.nodes["s1"][0]); got != epoch {
				t.Fatalf("current epoch moved %s -> %s: a failover happened", epoch, got)
			}
			w.finish(t, c, d)
		})
	}
}

// assertNotPromoted checks that s0-0 still owns its slots and s0-1 still follows it.
func (c *testCluster) assertNotPromoted(d Desired, masterID string) {
	t := c.t
	t.Helper()
	v := c.observe(d)
	if m := v.Node("s0-0"); !m.IsMaster() || m.OwnSlots().Len() == 0 {
		t.Fatal("s0-0 lost its slots: a promotion happened")
	}
	if r := v.Node("s0-1"); r.MasterID() != masterID {
		t.Fatalf("s0-1 follows %q, not its master: it was promoted", r.MasterID())
	}
}
