//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestDataSafety (label datasafety): the field failures that lose keys or
// hide their loss (issue 13; cases R18, R5, R20, C3). Each scenario runs
// its own 3×1 cluster, loads keys before the disruption and runs a writer
// that counts a write as acknowledged once `WAIT 1` confirms a replica has
// it; besides its `e2e: <scenario> <seconds>s ok|FAIL` line it prints
// `e2e: <scenario> keys: loaded N, lost L; writer: ... acknowledged lost A`.
func TestDataSafety(t *testing.T) {
	tier(t, tierCI)
	t.Run("restart-without-data", testRestartWithoutData)
	t.Run("sts-scaled-to-zero", func(t *testing.T) {
		tier(t, tierAll) // sts-scaled-to-zero-restored is the same, restored by the operator (doc.go, Tiers)
		testScaledToZero(t, true)
	})
	t.Run("sts-scaled-to-zero-restored", func(t *testing.T) { testScaledToZero(t, false) })
	t.Run("shard-lost", testShardLost)
	t.Run("asymmetric-partition", testAsymmetricPartition)
}

// testRestartWithoutData, R18: with persistence off, shard 0's master
// gets SIGKILL under writes; its container restarts at once on the same
// address with its nodes.conf but no data, faster than cluster-node-timeout.
// Pass: the restarted node is a replica, no key loaded before and no
// acknowledged write is lost, and the cluster is Ready again.
func testRestartWithoutData(t *testing.T) {
	const name = "datasafety/restart-without-data"
	scenario(t, name)
	c := newCluster(t, "restart-nodata", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Config = map[string]string{"appendonly": "no", "save": ""}
	})
	rc := c.waitReady(5 * time.Minute)
	idsBefore := c.checkConverged(rc)
	master, replica := masterOf(rc, 0), rc.Status.Shards[0].ReplicaPods[0]
	pod := c.pod(master)
	ip, restarts := pod.Status.PodIP, restartCount(pod)
	pw := c.password()

	cl := c.clusterClient()
	keys := loadKeys(t, cl, "r18", 20000)
	w := startWriter(t, cl, "r18w", writerOptions{Wait: true})
	w.waitWrites(200, time.Minute)

	oldPID, err := redisPID(ip)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	signalRedis(t, ip, syscall.SIGKILL)
	node := c.nodeClient(ip, pw)
	var sameIP, restarted bool
	ok, msg := c.eventually(2*time.Minute, func() (bool, string) {
		p := c.pod(master)
		// The container restarts (the start script execs redis-server),
		// or a start script that supervises redis-server starts it again.
		pid, _ := redisPID(p.Status.PodIP)
		if restartCount(p) <= restarts && (pid == 0 || pid == oldPID) || !podIsReady(p) {
			return false, fmt.Sprintf("%s: restarts %d, redis-server pid %d, ready %v", master, restartCount(p), pid, podIsReady(p))
		}
		restarted, sameIP = true, p.Status.PodIP == ip
		ctx, cancel := redisCtx()
		r, err := role(ctx, node)
		cancel()
		now := c.get()
		return r == "slave" && isReady(now), fmt.Sprintf("%s restarted, role %q (%v); %s", master, r, err, statusSummary(now))
	})
	t.Logf("%.0fs after the kill: %s", time.Since(start).Seconds(), msg)
	switch {
	case !restarted:
		t.Errorf("%s's redis-server did not start again: %s", master, msg)
	case !ok:
		t.Errorf("the restarted node is not a replica of a Ready cluster: %s", msg)
	}
	if restarted && !sameIP {
		t.Logf("note: %s restarted on another address (the scenario wants the same one)", master)
	}

	r := w.result()
	fresh := c.clusterClient()
	loadedLost, loadedWrong := keys.check(t, fresh, nil)
	ackedLost, ackedWrong := w.readBack(fresh, r.Acked)
	reportKeys(name, keys.n, len(loadedLost)+len(loadedWrong), r, len(ackedLost)+len(ackedWrong))
	if len(loadedLost)+len(loadedWrong) > 0 {
		t.Errorf("%d of %d keys loaded before the kill lost (first %s), %d with another value", len(loadedLost), keys.n, first(loadedLost), len(loadedWrong))
	}
	if len(ackedLost)+len(ackedWrong) > 0 {
		t.Errorf("%s; %d acknowledged keys lost (first %s), %d with another value", r, len(ackedLost), first(ackedLost), len(ackedWrong))
	}
	if t.Failed() {
		return
	}
	// A node without data may come back with its old node ID or as a new
	// node (reset, then joined): either is fine once it is a replica.
	ready := c.waitSettled(3 * time.Minute)
	if got := masterOf(ready, 0); got != replica {
		t.Errorf("shard 0's master is %s, want the former replica %s", got, replica)
	}
	ctx, cancel := redisCtx()
	defer cancel()
	id, err := node.ClusterMyID(ctx).Result()
	t.Logf("%s is node %s (%v), was %s before the kill", master, id, err, idsBefore[master])
}

// testScaledToZero, R5: with the operator stopped, every data StatefulSet
// is scaled to 0 by hand and the pods go. With scaleBack they are scaled
// back by hand before the operator starts again; without, the operator
// must restore the replicas itself (drift revert) within a couple of
// passes. Pass: every claim kept (same UID), every key readable, the same
// node IDs (no re-bootstrap: no slot assignment), Ready.
func testScaledToZero(t *testing.T, scaleBack bool) {
	name, ns := "datasafety/sts-scaled-to-zero", "scaled-zero"
	if !scaleBack {
		name, ns = name+"-restored", ns+"-restored"
	}
	scenario(t, name)
	c := newCluster(t, ns, nil)
	rc := c.waitReady(5 * time.Minute)
	idsBefore := c.checkConverged(rc)
	perShard := 1 + rc.Spec.ReplicasPerShard
	cl := c.clusterClient()
	keys := loadKeys(t, cl, "r5", 10000)
	w := startWriter(t, cl, "r5w", writerOptions{Wait: true})
	w.waitWrites(300, time.Minute)
	r := w.result()
	claims := c.claimUIDs()
	if len(claims) != int(rc.Spec.Shards*perShard) {
		t.Fatalf("%d claims before, want %d", len(claims), rc.Spec.Shards*perShard)
	}

	stopOperator(t)
	c.scaleShards(rc.Spec.Shards, 0)
	c.waitPodsGone(5 * time.Minute)
	if gone := compareClaims(claims, c.claimUIDs()); len(gone) > 0 {
		t.Errorf("after the scale to 0: %s", strings.Join(gone, ", "))
	}
	if scaleBack {
		c.scaleShards(rc.Spec.Shards, perShard)
		ok, msg := c.eventually(3*time.Minute, func() (bool, string) {
			n := 0
			for _, p := range c.pods() {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					n++
				}
			}
			return n == int(rc.Spec.Shards*perShard), fmt.Sprintf("%d pods running, StatefulSet replicas %v", n, c.shardReplicas(rc.Spec.Shards))
		})
		if !ok {
			var claimsNow []string
			for _, pvc := range c.claims() {
				claimsNow = append(claimsNow, fmt.Sprintf("%s %s deleting=%v", pvc.Name, pvc.Status.Phase, pvc.DeletionTimestamp != nil))
			}
			reportKeys(name, keys.n, -1, r, -1)
			t.Fatalf("the StatefulSets scaled back by hand did not run their pods again within 3 minutes: %s; claims: %v", msg, claimsNow)
		}
	}
	logFrom := opLogOffset(t)
	start := time.Now()
	startOperator(t)

	if !scaleBack {
		// A pass runs on start; a couple of passes (a resync or the
		// StatefulSets' own events) are well within 90 s.
		ok, msg := c.eventually(90*time.Second, func() (bool, string) {
			got := c.shardReplicas(rc.Spec.Shards)
			for _, n := range got {
				if n != perShard {
					return false, fmt.Sprintf("StatefulSet replicas %v, want %d each", got, perShard)
				}
			}
			return true, ""
		})
		if !ok {
			reportKeys(name, keys.n, -1, r, -1)
			t.Fatalf("the operator did not restore the StatefulSets scaled to 0 within 90 s: %s", msg)
		}
	}
	ready := c.waitSettled(5 * time.Minute)
	t.Logf("Ready %.0fs after the operator started", time.Since(start).Seconds())

	fresh := c.clusterClient()
	loadedLost, loadedWrong := keys.check(t, fresh, nil)
	ackedLost, ackedWrong := w.readBack(fresh, r.Acked)
	reportKeys(name, keys.n, len(loadedLost)+len(loadedWrong), r, len(ackedLost)+len(ackedWrong))
	if changed := compareClaims(claims, c.claimUIDs()); len(changed) > 0 {
		t.Errorf("claims: %s", strings.Join(changed, ", "))
	}
	if len(loadedLost)+len(loadedWrong) > 0 {
		t.Errorf("%d of %d keys lost (first %s), %d with another value", len(loadedLost), keys.n, first(loadedLost), len(loadedWrong))
	}
	if len(ackedLost)+len(ackedWrong) > 0 {
		t.Errorf("%s; %d acknowledged keys lost (first %s)", r, len(ackedLost), first(ackedLost))
	}
	if lines := operatorLog(t, logFrom, c.ns, "Assigning slots"); len(lines) > 0 {
		t.Errorf("the operator assigned slots again (re-bootstrap), %d times; first: %s", len(lines), lines[0])
	}
	for _, e := range c.events() {
		if e.Reason == "Topology" && eventTime(e).After(start.Add(-time.Second)) && strings.Contains(e.Message, "AddSlots") {
			t.Errorf("slot assignment event after the operator started: %s", e.Message)
		}
	}
	ids := c.checkConverged(ready)
	changed := 0
	for pod, id := range idsBefore {
		if ids[pod] != id {
			changed++
		}
	}
	if changed > 0 {
		t.Errorf("%d of %d pods came back as other nodes (before %v, after %v): the cluster was formed anew", changed, len(idsBefore), idsBefore, ids)
	}
}
