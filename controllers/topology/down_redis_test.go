package topology

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// TestReconcileScaleOutWithADownReplica: on real redis-server, a 3×1 cluster whose replica
// s1-1 is stopped (its pod Pending: a Down endpoint without an address) scales out to 4
// shards. Reconcile moves the slots with every key, ends Settled waiting for s1-1 only, and
// once s1-1 runs again the cluster converges to the full shape.
func TestReconcileScaleOutWithADownReplica(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{}, Options{WaitBudget: 5 * time.Second})
	all, d := c.form(3, 2)
	ds := redistest.Dataset{Prefix: "down", Keys: 3000}
	redistest.Load(t, c.client(d), ds)

	c.node("s1-1").Stop()
	all = append(all, c.addShards(1, 2)...)
	d = c.desired(1, all)
	d.Shards[1].Nodes[1] = Endpoint{Name: "s1-1", Down: "Pending"}
	// The controller requeues a pass that ends waiting for gossip to
	// agree (a replica that has not heard of a slot's new owner yet, on a
	// busy machine longer than WaitBudget; the controller looks again after
	// busyRequeue, 5 s); so does this test, a second apart, until a pass
	// ends Settled or does something else than wait. A pass waiting on a
	// Down node returns at once, so without the pause ten passes could all
	// come before a replica hears the last moved slots' new owner.
	res, err := c.tryReconcile(d, nil, 3*time.Minute)
	for i := 0; i < 10 && errors.Is(err, ErrNotReady) && res != nil && !res.Settled; i++ {
		time.Sleep(time.Second)
		res, err = c.tryReconcile(d, nil, 3*time.Minute)
	}
	if !errors.Is(err, ErrNotReady) || res == nil || !res.Settled || strings.Join(res.WaitingFor, ",") != "s1-1" {
		t.Fatalf("error %v, result %+v; want ErrNotReady, Settled waiting for s1-1", err, res)
	}
	if !strings.Contains(err.Error(), "waiting for s1-1 (Pending)") {
		t.Fatalf("error %q does not name the Down node", err)
	}
	for _, st := range res.Shards {
		if st.SlotCount != NumSlots/4 {
			t.Fatalf("shard %s owns %d slots, want %d", st.Name, st.SlotCount, NumSlots/4)
		}
	}
	if open := openSlots(c.observe(d)); len(open) > 0 {
		t.Fatalf("open slots %v", open)
	}
	redistest.Verify(t, c.client(d), ds)

	c.node("s1-1").Restart()
	d = c.desired(1, all)
	c.assertShape(d, c.reconcile(d, nil))
	redistest.Verify(t, c.client(d), ds)
}
