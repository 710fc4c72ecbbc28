//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// partitionFor is how long the asymmetric partition lasts. The engine of
// today forces CLUSTER FAILOVER TAKEOVER once a replica has held its master
// as failing for max(6 × cluster-node-timeout, 10 s), 30 s with the
// operator's 5000 ms default, counted from the replica's suspicion (one
// node-timeout after the cut): 60 s covers that and a pass.
const partitionFor = 60 * time.Second

// A settled cluster is observed again only every resync period (30 s), so
// nudgeAfter the cut the scenario annotates the RedisCluster, which starts
// a pass at once; from passGrace after that nudge the status must no
// longer say Ready or Healthy (the pass meets the master's dial timeouts).
const (
	nudgeAfter = 10 * time.Second
	passGrace  = 15 * time.Second
)

// testAsymmetricPartition, a variant of C3: the operator and shard 0's
// replica are cut from shard 0's master, which the other masters (the
// majority) still reach, for partitionFor under WAIT-1 writes. Redis then
// refuses to fail over (no majority holds the master as failed), and so
// must the operator. Pass: no promotion, 0 acknowledged writes lost and
// none of the writes the master accepted meanwhile, the status not Ready
// or Healthy once a pass ran while the operator cannot reach the master
// (issue 14 item 4), and Ready again once the cut ends.
//
// Every pod has its own network namespace and source address, and traffic
// between pods crosses the host's FORWARD chain, where the two rules
// between the pods go. The operator runs in its own pod: its connections
// to the master are cut in the same chain, by its pod IP.
func testAsymmetricPartition(t *testing.T) {
	const name = "datasafety/asymmetric-partition"
	scenario(t, name)
	c := newCluster(t, "asym-partition", nil)
	rc := c.waitReady(5 * time.Minute)
	c.checkConverged(rc)
	pw := c.password()
	masterPod, replicaPod := masterOf(rc, 0), rc.Status.Shards[0].ReplicaPods[0]
	M, R := c.pod(masterPod).Status.PodIP, c.pod(replicaPod).Status.PodIP

	const chain = "FORWARD"
	cl := c.clusterClient()
	w := startWriter(t, cl, "c3w", writerOptions{Wait: true})
	w.waitWrites(200, time.Minute)

	fw := &firewall{t: t}
	t.Cleanup(fw.remove)
	cut := time.Now()
	fw.add(chain, "-s", suiteOperatorPod(t).Status.PodIP, "-d", M, "-j", "DROP")
	fw.add(chain, "-s", R, "-d", M, "-j", "DROP")
	fw.add(chain, "-s", M, "-d", R, "-j", "DROP")
	masterNode, replicaNode := c.nodeClient(M, pw), c.nodeClient(R, pw)
	var promoted, demoted []string
	var replicaView string
	var nudged time.Time
	for time.Since(cut) < partitionFor {
		checkOperator(t)
		if nudged.IsZero() && time.Since(cut) >= nudgeAfter {
			c.update(func(rc *cachev1beta1.RedisCluster) {
				if rc.Annotations == nil {
					rc.Annotations = map[string]string{}
				}
				rc.Annotations["e2e.redis.io/nudge"] = time.Now().Format(time.RFC3339)
			})
			nudged = time.Now()
		}
		ctx, cancel := redisCtx()
		if r, err := role(ctx, replicaNode); err == nil && r == "master" {
			promoted = append(promoted, time.Now().Format("15:04:05.0"))
		}
		if r, err := role(ctx, masterNode); err == nil && r != "master" {
			demoted = append(demoted, time.Now().Format("15:04:05.0"))
		}
		if out, err := replicaNode.ClusterNodes(ctx).Result(); err == nil {
			for _, n := range parseNodes(out) {
				if n.IP() == M {
					replicaView = strings.Join(n.Flags, ",")
				}
			}
		}
		cancel()
		time.Sleep(500 * time.Millisecond)
	}
	fw.remove()
	healed := time.Now()
	t.Logf("partition of %s (%s) from the operator and %s (%s) from %s for %.0fs; the replica's view of it at the end: %s",
		masterPod, M, replicaPod, R, cut.Format("15:04:05"), healed.Sub(cut).Seconds(), replicaView)

	readyAgain, msg := c.eventually(3*time.Minute, c.settled)
	var claimedHealthy []string
	for _, ob := range c.obs.since(nudged.Add(passGrace)) {
		if ob.at.After(healed) {
			break
		}
		if ob.cond(cachev1beta1.RedisClusterReadyCondition) == "True" || ob.health == cachev1beta1.HealthHealthy {
			claimedHealthy = append(claimedHealthy, ob.at.Format("15:04:05"))
		}
	}
	r := w.result()
	fresh := c.clusterClient()
	ackedLost, ackedWrong := w.readBack(fresh, r.Acked)
	unrepLost, _ := w.readBack(fresh, r.Unreplicated)
	reportKeys(name, 0, 0, r, len(ackedLost)+len(ackedWrong))
	fmt.Printf("e2e: %s replica seen as master in %d polls, master as replica in %d; %d of %d writes the master took unreplicated lost; Ready/Healthy in %d polls while cut\n",
		name, len(promoted), len(demoted), len(unrepLost), len(r.Unreplicated), len(claimedHealthy))

	if len(promoted) > 0 || len(demoted) > 0 {
		t.Errorf("%s was promoted during the partition (first seen %s; %s demoted at %v), although the majority still reached %s",
			replicaPod, first(promoted), masterPod, first(demoted), masterPod)
	}
	if len(ackedLost)+len(ackedWrong) > 0 {
		t.Errorf("%s; %d acknowledged writes lost (first %s), %d with another value", r, len(ackedLost), first(ackedLost), len(ackedWrong))
	}
	if len(unrepLost) > 0 {
		t.Errorf("%d of the %d writes %s accepted while cut from its replica were lost (first %s)", len(unrepLost), len(r.Unreplicated), masterPod, first(unrepLost))
	}
	if len(claimedHealthy) > 0 {
		t.Errorf("issue 14 item 4: status said Ready or Healthy at %d polls (%s … %s) while the operator could not reach master %s",
			len(claimedHealthy), claimedHealthy[0], claimedHealthy[len(claimedHealthy)-1], masterPod)
	}
	if !readyAgain {
		t.Fatalf("not Ready, with Redis agreeing, within 3 minutes of the end of the partition: %s", msg)
	}
	ctx, cancel := redisCtx()
	defer cancel()
	if got, err := role(ctx, c.nodeClient(M, pw)); got != "master" {
		t.Errorf("%s is %q after the partition (%v), want master", masterPod, got, err)
	}
	c.checkConverged(c.get())
}
