package topology

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// A master of a formed cluster drops a slot from its own table while the other nodes keep
// it as that slot's owner (here by CLUSTER DELSLOTS on the master alone; a Redis 7.0 master
// was seen doing it by itself when a leaving master's last slot moved to it): it reports
// cluster_state:fail, and gossip never gives a node back its own slots. The next run hands
// the slot back to that master, with the key it kept, instead of reporting it lost; a slot
// whose named owner is unreachable is not handed to anyone.
func TestReclaimSlotItsOwnerDropped(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{Password: "rc-pw"}, Options{})
	all, d := c.form(3, 1)
	d.Formed = true
	cl := c.client(d)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const key = "reclaim:{a}" // slot 15495
	if err := cl.Set(ctx, key, "kept", 0).Err(); err != nil {
		t.Fatal(err)
	}
	slot := int(cl.ClusterKeySlot(ctx, key).Val())
	v := c.observe(d)
	var owner string
	for _, name := range all {
		if v.Node(name + "-0").OwnSlots().Has(slot) {
			owner = name + "-0"
		}
	}
	c.node(owner).Do("CLUSTER", "DELSLOTS", slot)
	waitFor(t, 10*time.Second, owner+" to report cluster_state:fail", func() bool {
		return !c.observe(d).Node(owner).Info.OK()
	})
	v = c.observe(d)
	for _, name := range all {
		n := v.Node(name + "-0")
		if n.Endpoint.Name == owner {
			continue
		}
		if r := n.Lookup(v.Node(owner).ID); r == nil || !slotIn(r.Slots, slot) {
			t.Fatalf("%s no longer names %s the owner of slot %d: the case is not set up", n.Endpoint.Name, owner, slot)
		}
	}
	p, steps, err := plan(v, d)
	if err != nil || len(steps) != 1 || steps[0].Kind != StepReclaim || steps[0].Node != owner ||
		FormatRanges(steps[0].Slots) != FormatRanges(RangesOf([]int{slot})) {
		t.Fatalf("plan = %v, %v (lost %+v), want one Reclaim of slot %d on %s", steps, err, p.lost, slot, owner)
	}
	c.assertShape(d, c.reconcile(d, nil))
	if got := cl.Get(ctx, key).Val(); got != "kept" {
		t.Fatalf("%s = %q after the reclaim, want the value the owner kept", key, got)
	}

	// The named owner unreachable (its node stopped): the slot is not handed to anyone.
	v = c.observe(d)
	v.Node(owner).Err = errors.New("stopped")
	if steps := (&planner{assessment: assess(v, d)}).reclaimSteps([]int{slot}); len(steps) != 0 {
		t.Fatalf("reclaim steps %v for a slot whose named owner is unreachable", steps)
	}
}

func slotIn(rs []SlotRange, slot int) bool {
	set := SlotSetOf(rs...)
	return set.Has(slot)
}
