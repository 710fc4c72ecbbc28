//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// shardLostWindow is how long a lost shard's status and events are
// watched for flapping and storms.
const shardLostWindow = 60 * time.Second

// testShardLost, R20: both pods and both claims of shard 1 are deleted at
// once, so the shard comes back as new, empty nodes. Pass: one stable
// condition naming the lost slot ranges (Ready False with a ShardLost
// reason, SlotsAssigned False naming the ranges), no phase change and at
// most a handful of events over 60 s, and no "Reconciler error" for a
// conflict;
// then, with lostShardPolicy Reassign, Ready with every slot served, the
// lost shard's keys gone and every other key there.
func testShardLost(t *testing.T) {
	const name = "datasafety/shard-lost"
	scenario(t, name)
	c := newCluster(t, "shard-lost", nil)
	rc := c.waitReady(5 * time.Minute)
	c.checkConverged(rc)
	lostRanges := rc.Status.Shards[1].Slots
	lost := slotSet(t, lostRanges)
	cl := c.clusterClient()
	keys := loadKeys(t, cl, "r20", 10000)
	w := startWriter(t, cl, "r20w", writerOptions{Wait: true})
	w.waitWrites(300, time.Minute)
	r := w.result()

	// Which keys lived on shard 1, by Redis's own CLUSTER KEYSLOT.
	names := make([]string, 0, keys.n+len(r.Acked))
	for i := 0; i < keys.n; i++ {
		names = append(names, keys.key(i))
	}
	for _, i := range r.Acked {
		names = append(names, w.key(i))
	}
	slots := keySlots(t, c, c.pod(masterOf(rc, 0)).Status.PodIP, names)
	var keysKept, keysGone, ackedKept []int
	for i := 0; i < keys.n; i++ {
		if lost.Has(slots[i]) {
			keysGone = append(keysGone, i)
		} else {
			keysKept = append(keysKept, i)
		}
	}
	for j, i := range r.Acked {
		if !lost.Has(slots[keys.n+j]) {
			ackedKept = append(ackedKept, i)
		}
	}

	logFrom := opLogOffset(t)
	shardPods := append([]string{masterOf(rc, 1)}, rc.Status.Shards[1].ReplicaPods...)
	old := map[string]types.UID{}
	var claimNames []string
	for _, pn := range shardPods {
		p := c.pod(pn)
		old[pn] = p.UID
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				claimNames = append(claimNames, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	ctx := context.Background()
	for _, cn := range claimNames {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: cn}}
		if err := env.k8s.Delete(ctx, pvc); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting claim %s: %v", cn, err)
		}
	}
	for _, pn := range shardPods {
		if err := env.k8s.Delete(ctx, c.pod(pn)); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting pod %s: %v", pn, err)
		}
	}
	t.Logf("deleted pods %v and claims %v of shard 1 (slots %v)", shardPods, claimNames, lostRanges)
	c.poll("running new pods for shard 1", 3*time.Minute, func() (bool, string) {
		n := 0
		for _, pn := range shardPods {
			p := c.podsQuiet()
			for i := range p {
				if p[i].Name == pn && p[i].UID != old[pn] && podIsReady(&p[i]) {
					n++
				}
			}
		}
		return n == len(shardPods), fmt.Sprintf("%d of %d new pods ready", n, len(shardPods))
	})
	since := time.Now()
	ok, msg := c.eventually(2*time.Minute, func() (bool, string) {
		for _, ob := range c.obs.since(since) {
			if strings.Contains(ob.conditions[cachev1beta1.RedisClusterReadyCondition].Reason, cachev1beta1.RedisClusterShardLostReason) {
				return true, ""
			}
		}
		return false, statusSummary(c.get())
	})
	if !ok {
		t.Errorf("Ready never had a ShardLost reason: %s", msg)
	}

	before := c.eventTotals()
	windowStart := time.Now()
	time.Sleep(shardLostWindow)
	checkOperator(t)
	delta, total := eventDelta(before, c.eventTotals())
	seen := c.obs.since(windowStart)
	phases, readyReasons, slotsMsgs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, ob := range seen {
		phases[string(ob.phase)] = true
		ready := ob.conditions[cachev1beta1.RedisClusterReadyCondition]
		readyReasons[string(ready.Status)+"/"+ready.Reason] = true
		sa := ob.conditions[cachev1beta1.RedisClusterSlotsAssignedCondition]
		slotsMsgs[string(sa.Status)+"/"+sa.Reason+": "+sa.Message] = true
	}
	reconcileErrors := operatorLog(t, logFrom, c.ns, "Reconciler error")
	conflicts := operatorLog(t, logFrom, c.ns, "Reconciler error", "has been modified")
	timeline := strings.Split(c.obs.phasesSince(windowStart), " → ")
	fmt.Printf("e2e: %s window %.0fs: %d events %v; %d phase changes (%s); Ready %v; %d \"Reconciler error\" lines (%d conflicts)\n",
		name, shardLostWindow.Seconds(), total, delta, len(timeline)-1, strings.Join(timeline[:min(4, len(timeline))], " → "),
		slices.Sorted(maps.Keys(readyReasons)), len(reconcileErrors), len(conflicts))
	if len(phases) != 1 {
		t.Errorf("status.phase flapped over %s: %d changes among %v", shardLostWindow, len(timeline)-1, slices.Sorted(maps.Keys(phases)))
	}
	if len(readyReasons) != 1 || !strings.Contains(strings.Join(slices.Sorted(maps.Keys(readyReasons)), ""), "False/"+cachev1beta1.RedisClusterShardLostReason) {
		t.Errorf("Ready over %s: %v, want one False/ShardLost-like reason", shardLostWindow, slices.Sorted(maps.Keys(readyReasons)))
	}
	for m := range slotsMsgs {
		if !strings.HasPrefix(m, "False/") || !containsAll(m, lostRanges) {
			t.Errorf("SlotsAssigned %q over the window: want False naming the lost ranges %v", m, lostRanges)
		}
	}
	if len(slotsMsgs) > 1 {
		t.Errorf("SlotsAssigned changed %d times over the window: %v", len(slotsMsgs)-1, slices.Sorted(maps.Keys(slotsMsgs)))
	}
	if total > 5 {
		t.Errorf("%d events over %s (%v): a storm, want one per transition", total, shardLostWindow, delta)
	}
	if len(conflicts) > 0 {
		t.Errorf("%d \"Reconciler error\" lines for a conflict since the shard was lost, want a quiet retry; first: %.400s", len(conflicts), conflicts[0])
	}

	// The documented opt-in repair.
	c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.LostShardPolicy = cachev1beta1.LostShardReassign })
	ready := c.waitSettled(5 * time.Minute)
	fresh := c.clusterClient()
	keptLost, keptWrong := keys.check(t, fresh, keysKept)
	goneLost, _ := keys.check(t, fresh, keysGone)
	ackedLost, ackedWrong := w.readBack(fresh, ackedKept)
	reportKeys(name, len(keysKept), len(keptLost)+len(keptWrong), writerResult{Attempts: r.Attempts, Acked: ackedKept}, len(ackedLost)+len(ackedWrong))
	t.Logf("%d keys lived on the lost shard; %d of them are gone", len(keysGone), len(goneLost))
	if len(keptLost)+len(keptWrong) > 0 {
		t.Errorf("%d of %d keys of the other shards lost (first %s), %d with another value", len(keptLost), len(keysKept), first(keptLost), len(keptWrong))
	}
	if len(ackedLost)+len(ackedWrong) > 0 {
		t.Errorf("%d of %d acknowledged writes to the other shards lost (first %s)", len(ackedLost), len(ackedKept), first(ackedLost))
	}
	if len(goneLost) != len(keysGone) {
		t.Errorf("%d of the lost shard's %d keys are readable after its claims were deleted", len(keysGone)-len(goneLost), len(keysGone))
	}
	c.checkConverged(ready)
}

// containsAll reports whether s contains every one of parts.
func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
