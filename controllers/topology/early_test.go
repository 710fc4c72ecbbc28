package topology

import (
	"errors"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// A fresh cluster (Desired.Fresh) whose pods come up one by one: each shard's master gets
// its canonical block of slots and its config epoch while other pods still start, and no
// node meets another before every node is up; then the cluster forms with those masters and
// blocks. The same cluster not marked fresh assigns nothing until every node is up.
func TestEarlySlotsOfAFreshCluster(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{Password: "es-pw"}, Options{})
	all := c.addShards(3, 2)
	full := c.desired(1, all)
	// Placed as the e2e plane's nodes are: n1 and n4 in zone a, n2 in b, n3 in c.
	placement := map[string][2]string{
		"s0-0": {"n1", "a"}, "s0-1": {"n2", "b"},
		"s1-0": {"n1", "a"}, "s1-1": {"n3", "c"},
		"s2-0": {"n4", "a"}, "s2-1": {"n2", "b"},
	}
	for i := range full.Shards {
		for j := range full.Shards[i].Nodes {
			ep := &full.Shards[i].Nodes[j]
			ep.Node, ep.Zone = placement[ep.Name][0], placement[ep.Name][1]
		}
	}
	starting := func(d Desired, names ...string) Desired {
		out := d
		out.Shards = nil
		for _, sh := range d.Shards {
			sh.Nodes = append([]Endpoint(nil), sh.Nodes...)
			for j := range sh.Nodes {
				for _, n := range names {
					if sh.Nodes[j].Name == n {
						sh.Nodes[j].Addr, sh.Nodes[j].Down = "", "ContainerCreating"
					}
				}
			}
			out.Shards = append(out.Shards, sh)
		}
		return out
	}
	blocks := canonicalBlocks(3)

	// Not fresh: nothing is assigned while a pod starts.
	partial := starting(full, "s1-1")
	if _, err := c.tryReconcile(partial, nil, time.Minute); !errors.Is(err, ErrNotReady) {
		t.Fatalf("not fresh, one pod starting: %v, want ErrNotReady", err)
	}
	for _, n := range c.observe(partial).Nodes {
		if n.OwnSlots().Len() > 0 {
			t.Fatalf("not fresh: %s got slots before every node was up", n.Endpoint.Name)
		}
	}

	// Fresh: s1's master can only be s1-1 (zone c; the other zones' nodes go to s0 and s2).
	// While s1-1 starts, s0 and s2 get their masters' blocks at once and s1 waits; once
	// s1-1 is up, s1 gets its block even though s1-0 still starts (it never ran).
	early := map[string]string{} // shard -> its master
	for _, step := range []struct {
		starting []string
		want     int
	}{{[]string{"s1-1"}, 2}, {[]string{"s1-0"}, 3}} {
		partial := starting(full, step.starting...)
		partial.Fresh = true
		if _, err := c.tryReconcile(partial, nil, time.Minute); !errors.Is(err, ErrNotReady) {
			t.Fatalf("fresh, %v starting: %v, want ErrNotReady", step.starting, err)
		}
		for _, n := range c.observe(partial).Nodes {
			if len(n.Known) != 1 {
				t.Fatalf("%s knows %d nodes before every node is up", n.Endpoint.Name, len(n.Known))
			}
			own := n.OwnSlots().Ranges()
			if len(own) == 0 {
				continue
			}
			i := int(n.Endpoint.Name[1] - '0')
			if len(own) != 1 || own[0] != blocks[i] || n.Self().ConfigEpoch != uint64(i+1) {
				t.Fatalf("%s owns %s with epoch %d, want %s with epoch %d", n.Endpoint.Name, FormatRanges(own), n.Self().ConfigEpoch, FormatRanges(blocks[i:i+1]), i+1)
			}
			if m, ok := early[all[i]]; ok && m != n.Endpoint.Name {
				t.Fatalf("shard %s has two masters with slots: %s and %s", all[i], m, n.Endpoint.Name)
			}
			early[all[i]] = n.Endpoint.Name
		}
		if len(early) != step.want || step.want == 3 && early["s1"] != "s1-1" {
			t.Fatalf("%v starting: early masters %v, want %d (s1's being s1-1)", step.starting, early, step.want)
		}
	}

	// Every pod up: the cluster forms around them.
	fresh := full
	fresh.Fresh = true
	res := c.reconcile(fresh, nil)
	c.assertShape(fresh, res)
	v := c.observe(fresh)
	zones := map[string]bool{}
	for i, name := range all {
		m := v.Node(early[name])
		if own := m.OwnSlots().Ranges(); !m.IsMaster() || len(own) != 1 || own[0] != blocks[i] {
			t.Fatalf("shard %s: %s (master %v) owns %s, want the early master with %s", name, early[name], m.IsMaster(), FormatRanges(own), FormatRanges(blocks[i:i+1]))
		}
		zones[placement[early[name]][1]] = true
	}
	if len(zones) != 3 {
		t.Fatalf("masters %v in zones %v: not spread over the three", early, zones)
	}
}
