//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cordonNode sets or clears the node's spec.unschedulable, as `kubectl
// cordon`/`uncordon` do. A cordon is lifted again at cleanup.
func cordonNode(t testing.TB, node string, on bool) {
	t.Helper()
	var n corev1.Node
	ctx := context.Background()
	if err := env.k8s.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatalf("getting node %s: %v", node, err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = on
	if err := env.k8s.Patch(ctx, &n, patch); err != nil {
		t.Fatalf("cordoning node %s (%v): %v", node, on, err)
	}
	if on {
		t.Cleanup(func() { cordonNode(t, node, false) })
	}
}

// drainNode is `kubectl drain --pod-selector` for the pods of c: it
// cordons node and evicts each of c's pods there through the Eviction API,
// which refuses (429) while a PodDisruptionBudget would be broken; a
// refused eviction is tried again every second until timeout. It returns
// once no pod of c is left on node, and how many evictions were refused.
func drainNode(t testing.TB, c *cluster, node string, timeout time.Duration) int {
	t.Helper()
	cordonNode(t, node, true)
	refused := 0
	deadline := time.Now().Add(timeout)
	for {
		var left []string
		for _, p := range c.podsQuiet() {
			if p.Spec.NodeName != node {
				continue
			}
			left = append(left, p.Name)
			if p.DeletionTimestamp != nil {
				continue
			}
			ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
			switch err := env.k8s.SubResource("eviction").Create(context.Background(), &p, ev); {
			case err == nil:
				t.Logf("evicted %s from %s", p.Name, node)
			case apierrors.IsTooManyRequests(err):
				refused++
			case !apierrors.IsNotFound(err):
				t.Fatalf("evicting %s: %v", p.Name, err)
			}
		}
		if len(left) == 0 {
			return refused
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s not drained within %s: %v left", node, timeout, left)
		}
		time.Sleep(time.Second)
	}
}

// testDrainEveryNode drains every node one after the other under WAIT-1
// writes (the cluster's pods only): drain, wait until the cluster is
// settled again, uncordon, next. Pass: every drain completes through
// evictions (the PDBs let one pod of a shard go at a time), the cluster
// is settled after each, and 0 acknowledged writes are lost.
func testDrainEveryNode(t *testing.T) {
	const name = "chaos/drain-every-node"
	scenario(t, name)
	c := newCluster(t, "chaos-drain", nil)
	rc := c.waitReady(5 * time.Minute)
	c.checkConverged(rc)
	var nodes corev1.NodeList
	if err := env.k8s.List(context.Background(), &nodes); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)

	w := startWriter(t, c.clusterClient(), "chaos-drain", writerOptions{Wait: true})
	w.waitWrites(200, time.Minute)
	start := time.Now()
	refused := 0
	for _, node := range names {
		refused += drainNode(t, c, node, 3*time.Minute)
		c.waitSettled(5 * time.Minute)
		cordonNode(t, node, false)
	}
	ready := time.Now()
	w.waitWrites(200, time.Minute)
	r := w.result()
	lost, wrong := w.readBack(c.clusterClient(), r.Acked)
	fmt.Printf("e2e: %s acknowledged %d, acknowledged lost %d; %d nodes drained, %d evictions refused by a PDB; Ready after the last drain, %.0fs in all\n",
		name, len(r.Acked), len(lost)+len(wrong), len(names), refused, ready.Sub(start).Seconds())
	if len(lost)+len(wrong) > 0 {
		t.Errorf("%s; %d acknowledged writes lost (first %s), %d with another value", r, len(lost), first(lost), len(wrong))
	}
	ids := c.checkConverged(c.get())
	c.checkStatusShards(c.get(), ids)
}
