package topology

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// The tests that run real redis-servers for several seconds, mostly waiting on
// Redis (gossip, failover, node timeouts), call t.Parallel(): each has its own
// nodes on free ports (and, with OwnAddress, its own addresses, so a Cut
// touches only its own pairs), and `make unit` runs them three at a time
// (-parallel 3). Those that time a wait or must cancel inside a round
// (TestWaitBudget, TestDeadlineEndsAWait, the Cancel ones) stay serial.

// testNodeTimeout keeps failure detection fast while tolerating a busy machine.
const testNodeTimeout = 3 * time.Second

// testCluster is a set of real redis-server processes grouped into named shards.
type testCluster struct {
	t      *testing.T
	opts   redistest.Options
	shards []string                     // shard names in creation order
	nodes  map[string][]*redistest.Node // shard name -> nodes, ordinal order
	engine *Engine
}

func newTestCluster(t *testing.T, opts redistest.Options, engineOpts Options) *testCluster {
	t.Helper()
	if opts.NodeTimeout == 0 {
		opts.NodeTimeout = testNodeTimeout
	}
	engineOpts.Password = opts.Password
	engineOpts.Logger = testr.NewWithOptions(t, testr.Options{LogTimestamp: true})
	return &testCluster{t: t, opts: opts, nodes: map[string][]*redistest.Node{}, engine: New(engineOpts)}
}

// form starts shards shards of perShard nodes each, forms the cluster with perShard-1
// replicas per shard and checks its shape: how most tests begin. It returns the shard names
// and the desired shape.
func (c *testCluster) form(shards, perShard int) ([]string, Desired) {
	c.t.Helper()
	all := c.addShards(shards, perShard)
	d := c.desired(perShard-1, all)
	c.assertShape(d, c.reconcile(d, nil))
	return all, d
}

// addShards starts count shards of perShard nodes each.
func (c *testCluster) addShards(count, perShard int) []string {
	c.t.Helper()
	started := redistest.Start(c.t, count*perShard, c.opts)
	var names []string
	for i := range count {
		name := fmt.Sprintf("s%d", len(c.shards))
		c.shards = append(c.shards, name)
		c.nodes[name] = started[i*perShard : (i+1)*perShard]
		names = append(names, name)
	}
	return names
}

func (c *testCluster) spec(name string) ShardSpec {
	s := ShardSpec{Name: name}
	for i, n := range c.nodes[name] {
		s.Nodes = append(s.Nodes, Endpoint{Name: fmt.Sprintf("%s-%d", name, i), Addr: n.Addr()})
	}
	return s
}

// desired builds Desired from the current addresses: shards[:active] own slots, the shards
// named in leaving are leaving.
func (c *testCluster) desired(replicas int, active []string, leaving ...string) Desired {
	d := Desired{ReplicasPerShard: replicas}
	for _, name := range active {
		d.Shards = append(d.Shards, c.spec(name))
	}
	for _, name := range leaving {
		d.Leaving = append(d.Leaving, c.spec(name))
	}
	return d
}

func (c *testCluster) node(endpoint string) *redistest.Node {
	shard, idx, _ := strings.Cut(endpoint[1:], "-")
	var i int
	fmt.Sscan(idx, &i)
	return c.nodes["s"+shard][i]
}

// reconcile runs Reconcile with a deadline and fails the test on error.
func (c *testCluster) reconcile(d Desired, progress func(Progress)) *Result {
	c.t.Helper()
	res, err := c.tryReconcile(d, progress, 3*time.Minute)
	if err != nil {
		msg := ""
		if res != nil {
			msg = res.Message
		}
		c.t.Fatalf("Reconcile: %v (%s)", err, msg)
	}
	return res
}

func (c *testCluster) tryReconcile(d Desired, progress func(Progress), timeout time.Duration) (*Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.engine.Reconcile(ctx, d, progress)
}

func (c *testCluster) client(d Desired) *redis.ClusterClient {
	var addrs []string
	for _, ep := range d.endpoints() {
		addrs = append(addrs, ep.Addr)
	}
	return redistest.ClusterClient(c.t, c.opts.Password, addrs...)
}

func (c *testCluster) observe(d Desired) *ClusterView {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v, err := c.engine.Observe(ctx, d.endpoints())
	if err != nil {
		c.t.Fatal(err)
	}
	return v
}

// assertShape checks the converged cluster against Redis itself: every desired node
// reachable with cluster_state:ok; all nodes agree on one slot map; each shard has one
// master owning an even share (counts differ by at most one) and every other node of the
// shard replicates it with its link up; no open slot anywhere.
func (c *testCluster) assertShape(d Desired, res *Result) {
	t := c.t
	t.Helper()
	if !res.Converged {
		t.Fatalf("not converged: %s", res.Message)
	}
	v := c.observe(d)
	var ref [NumSlots]string
	for i, n := range v.Nodes {
		if !n.Reachable() {
			t.Fatalf("%s unreachable: %v", n.Endpoint.Name, n.Err)
		}
		if !n.Info.OK() || n.Info.SlotsAssigned != NumSlots {
			t.Fatalf("%s: cluster_state %s, %d slots assigned", n.Endpoint.Name, n.Info.State, n.Info.SlotsAssigned)
		}
		var table [NumSlots]string
		for _, r := range n.Known {
			if len(r.Importing)+len(r.Migrating) > 0 {
				t.Fatalf("%s has open slots", n.Endpoint.Name)
			}
			for _, sr := range r.Slots {
				for s := sr.Start; s <= sr.End; s++ {
					table[s] = r.ID
				}
			}
		}
		if i == 0 {
			ref = table
		} else if table != ref {
			t.Fatalf("%s disagrees on the slot map", n.Endpoint.Name)
		}
	}
	lo, hi := NumSlots/len(d.Shards), (NumSlots+len(d.Shards)-1)/len(d.Shards)
	for i, sh := range d.Shards {
		var master *NodeView
		for _, ep := range sh.Nodes {
			if n := v.Node(ep.Name); n.IsMaster() {
				if master != nil {
					t.Fatalf("shard %s has two masters", sh.Name)
				}
				master = n
			}
		}
		if master == nil {
			t.Fatalf("shard %s has no master", sh.Name)
		}
		if cnt := master.OwnSlots().Len(); cnt < lo || cnt > hi {
			t.Fatalf("shard %s master owns %d slots, want %d..%d", sh.Name, cnt, lo, hi)
		}
		for _, ep := range sh.Nodes {
			n := v.Node(ep.Name)
			if n != master && (n.MasterID() != master.ID || !n.Replication.MasterLinkUp) {
				t.Fatalf("%s does not replicate its shard master %s (master %q, link up %v)", ep.Name, master.Endpoint.Name, n.MasterID(), n.Replication.MasterLinkUp)
			}
		}
		st := res.Shards[i]
		if st.Name != sh.Name || st.MasterNodeID != master.ID || len(st.ReplicaNames) != len(sh.Nodes)-1 || st.SlotCount != master.OwnSlots().Len() {
			t.Fatalf("status %+v does not match shard %s (master %s)", st, sh.Name, master.ID)
		}
	}
}

// openSlots lists "[...]" open-slot markers on every reachable node.
func openSlots(v *ClusterView) []string {
	var out []string
	for _, n := range v.Nodes {
		if s := n.Self(); s != nil {
			for sl, peer := range s.Migrating {
				out = append(out, fmt.Sprintf("%s:%d->%s", n.Endpoint.Name, sl, peer[:8]))
			}
			for sl, peer := range s.Importing {
				out = append(out, fmt.Sprintf("%s:%d<-%s", n.Endpoint.Name, sl, peer[:8]))
			}
		}
	}
	return out
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
