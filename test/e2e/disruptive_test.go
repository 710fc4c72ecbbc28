//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestDisruptive (label disruptive), R1: with persistence on, every pod of
// a 3×1 cluster holding 10k keys is deleted at once. The pods come back on
// new addresses with their volumes; the cluster is Ready (16384 slots,
// cluster_state ok) within 60 s of the pods running, every key is there,
// and no node was reset, flushed or re-created.
func TestDisruptive(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	t.Run("delete-all-pods", func(t *testing.T) {
		scenario(t, "disruptive/delete-all-pods")
		c := newCluster(t, "full-restart", nil)
		rc := c.waitReady(5 * time.Minute)
		cl := c.clusterClient()
		w := startWriter(t, cl, "r1", writerOptions{Max: 10000, Interval: time.Microsecond})
		w.waitDone(5 * time.Minute)
		if r := w.result(); len(r.Acked) != 10000 {
			t.Fatalf("loading 10k keys: %s", r)
		}
		idsBefore := c.checkConverged(rc)
		old := map[string]types.UID{}
		for _, p := range c.pods() {
			old[p.Name] = p.UID
		}

		start := time.Now()
		if err := env.k8s.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(c.ns),
			client.MatchingLabels{resources.LabelCluster: c.name}); err != nil {
			t.Fatalf("deleting every pod: %v", err)
		}
		// The moment every pod of the cluster runs again (new pods, phase
		// Running): the 60 s of R1 count from here.
		var running time.Time
		c.poll("running again", 5*time.Minute, func() (bool, string) {
			pods := c.pods()
			n := 0
			for _, p := range pods {
				if p.UID != old[p.Name] && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					n++
				}
			}
			running = time.Now()
			return n == len(old), fmt.Sprintf("%d of %d new pods running", n, len(old))
		})
		// Ready as a pass after the deletion wrote it: the pass running at
		// the deletion still writes the Ready it began with.
		ready := c.waitReadyAfter(start, 60*time.Second)
		left := "between two of the observer's polls (200 ms)"
		for _, ob := range c.obs.since(start) {
			if ob.cond(cachev1beta1.RedisClusterReadyCondition) != metav1.ConditionTrue {
				left = fmt.Sprintf("%.1fs after the deletion", ob.at.Sub(start).Seconds())
				break
			}
		}
		t.Logf("pods running %.0fs after the deletion; Ready %.0fs after that; status left Ready %s",
			running.Sub(start).Seconds(), time.Since(running).Seconds(), left)

		ids := c.checkConverged(ready)
		c.checkStatusShards(ready, ids)
		for pod, id := range idsBefore {
			if ids[pod] != id {
				t.Errorf("%s came back as node %s, was %s: re-created or reset", pod, ids[pod], id)
			}
		}
		for _, e := range c.events() {
			if e.Reason == "Topology" && eventTime(e).After(start.Add(-time.Second)) &&
				(strings.Contains(e.Message, "AddSlots") || strings.Contains(e.Message, "Migrate") || strings.Contains(e.Message, "Forget")) {
				t.Errorf("slot work after the restart (the cluster was formed already): %s", e.Message)
			}
		}
		// A new client: the old one knew only the old addresses.
		w.verify(c.clusterClient())
	})
}
