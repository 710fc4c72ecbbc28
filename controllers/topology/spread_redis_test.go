package topology

import (
	"strings"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// TestReconcileSpreadsMasters: a real 3×1 cluster whose three masters the controller
// reports on node n1 (as after failovers onto it), their replicas on n2, n3 and n2. Under
// WAIT-1 writes, Reconcile moves masters with planned CLUSTER FAILOVERs, one at a time,
// until no node holds more than one: two moves (n1 keeps one master). Every acknowledged
// write is readable afterwards, the cluster has its shape, and Reconcile again moves
// nothing.
func TestReconcileSpreadsMasters(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{}, Options{})
	_, d := c.form(3, 2)
	res := c.reconcile(d, nil)
	node := map[string]string{}
	replicaNodes := []string{"n2", "n3", "n2"}
	for i, sh := range res.Shards {
		node[sh.MasterName] = "n1"
		for _, r := range sh.ReplicaNames {
			node[r] = replicaNodes[i]
		}
	}
	d = placedOn(d, node, nil)
	w := startAckWriter(t, c, d, "spread")
	time.Sleep(time.Second)
	var steps []string
	res = c.reconcile(d, func(p Progress) {
		if strings.HasPrefix(p.Step, "Failover") {
			steps = append(steps, p.Step)
		}
	})
	time.Sleep(time.Second)
	w.finish(t, c, d)
	c.assertShape(d, res)
	perNode := map[string]int{}
	for _, sh := range res.Shards {
		perNode[node[sh.MasterName]]++
	}
	if perNode["n1"] != 1 || perNode["n2"] != 1 || perNode["n3"] != 1 {
		t.Errorf("masters per node %v after Reconcile, want one on each", perNode)
	}
	if len(steps) != 2 {
		t.Errorf("failover steps %q, want 2", steps)
	}
	for _, s := range steps {
		if !strings.Contains(s, "moving master of") || !strings.Contains(s, "node n1 holds") {
			t.Errorf("step %q does not say why", s)
		}
	}
	steps = nil
	c.reconcile(d, func(p Progress) {
		if p.Step != "" && !strings.HasPrefix(p.Step, "Wait") {
			steps = append(steps, p.Step)
		}
	})
	if len(steps) > 0 {
		t.Errorf("spread cluster: Reconcile ran %q, want nothing", steps)
	}
}
