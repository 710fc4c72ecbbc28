//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestFailover (label failover): a master's pod goes away under writes;
// its replica takes over, the pod comes back as a replica with its node
// ID (no reset, no re-create), and the cluster is Ready again without a
// bootstrap or a rebalance (R2, R3). Writes count as acknowledged only
// once WAIT 1 confirms a replica has them.
func TestFailover(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	c := newCluster(t, "failover", nil)
	c.waitReady(5 * time.Minute)

	// R2: `kubectl delete pod` of shard 0's master.
	t.Run("delete-master-pod", func(t *testing.T) {
		scenario(t, "failover/delete-master-pod")
		c := c.with(t)
		c.loseMaster(0, func(pod string, ip string) {
			if err := env.k8s.Delete(context.Background(), c.pod(pod)); err != nil {
				t.Fatalf("deleting pod %s: %v", pod, err)
			}
		}, false)
	})

	// R3: shard 1's master hangs (SIGSTOP: it neither answers nor fails
	// over) and its pod is then force-deleted, as when its node is lost.
	t.Run("master-crash", func(t *testing.T) {
		scenario(t, "failover/master-crash")
		c := c.with(t)
		c.loseMaster(1, func(pod string, ip string) {
			signalRedis(t, ip, syscall.SIGSTOP)
		}, true)
	})
}

// loseMaster takes shard's master away with lose under a WAIT-acknowledged
// write load and checks the recovery. With hung set, the master's process
// was frozen: the test waits for its replica's promotion and for the
// operator to report the lost coverage or redundancy, and then
// force-deletes the frozen pod.
func (c *cluster) loseMaster(shard int, lose func(pod, ip string), hung bool) {
	t := c.t
	t.Helper()
	rc := c.get()
	master := masterOf(rc, shard)
	replicas := rc.Status.Shards[shard].ReplicaPods
	if master == "" || len(replicas) != 1 {
		t.Fatalf("shard %d: master %q replicas %v", shard, master, replicas)
	}
	replica := replicas[0]
	idsBefore := c.checkConverged(rc)
	oldPod := c.pod(master)
	pw := c.password()

	cl := c.clusterClient()
	w := startWriter(t, cl, fmt.Sprintf("failover-%d", shard), writerOptions{Wait: true})
	w.waitWrites(200, time.Minute)
	start := time.Now()
	lose(master, oldPod.Status.PodIP)

	if hung {
		// The replica takes over by itself (Redis Cluster failover); the
		// operator reports the loss meanwhile and does not act on slots.
		replicaClient := c.nodeClient(c.pod(replica).Status.PodIP, pw)
		c.poll("failed over to "+replica, 2*time.Minute, func() (bool, string) {
			ctx, cancel := redisCtx()
			defer cancel()
			r, err := role(ctx, replicaClient)
			return r == "master", fmt.Sprintf("%s role %q (%v)", replica, r, err)
		})
		c.poll("reporting the lost master", 2*time.Minute, func() (bool, string) {
			for _, ob := range c.obs.since(start) {
				if ob.cond(cachev1beta1.RedisClusterSlotsAssignedCondition) == metav1.ConditionFalse ||
					ob.cond(cachev1beta1.RedisClusterDegradedCondition) == metav1.ConditionTrue {
					return true, ""
				}
			}
			return false, statusSummary(c.get())
		})
		if err := env.k8s.Delete(context.Background(), c.pod(master), client.GracePeriodSeconds(0)); err != nil {
			t.Fatalf("force-deleting pod %s: %v", master, err)
		}
		// The frozen process may still hold its files; the node stops it
		// with SIGKILL after the minimum grace, and so does this.
		if pid, err := redisPID(oldPod.Status.PodIP); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	// The pod comes back (a new pod object) and the cluster is Ready again.
	c.poll("recreating "+master, 3*time.Minute, func() (bool, string) {
		p := c.podsQuiet()
		for i := range p {
			if p[i].Name == master && p[i].UID != oldPod.UID && podIsReady(&p[i]) {
				return true, ""
			}
		}
		return false, "the pod is not back and ready"
	})
	rc = c.waitReadyAfter(start, 5*time.Minute)
	ready := time.Now()
	w.waitWrites(200, time.Minute)
	r := w.verify(c.clusterClient())

	ids := c.checkConverged(rc)
	c.checkStatusShards(rc, ids)
	if got := masterOf(rc, shard); got != replica {
		t.Errorf("shard %d: master is %s, want the former replica %s", shard, got, replica)
	}
	if ids[master] != idsBefore[master] {
		t.Errorf("%s came back as node %s, was %s: its node was reset or re-created", master, ids[master], idsBefore[master])
	}
	ctx, cancel := redisCtx()
	back, err := role(ctx, c.nodeClient(c.pod(master).Status.PodIP, pw))
	cancel()
	if back != "slave" {
		t.Errorf("%s came back with role %q (%v), want a replica", master, back, err)
	}
	for pod, id := range idsBefore {
		if ids[pod] != id {
			t.Errorf("node of %s changed from %s to %s", pod, id, ids[pod])
		}
	}

	// No bootstrap path and no slot work: the operator never assigned or
	// moved slots, nor reported Bootstrapping.
	for _, ob := range c.obs.since(start) {
		if ob.phase == cachev1beta1.PhaseBootstrapping {
			t.Errorf("phase Bootstrapping reported at %s after the master was lost", ob.at.Format("15:04:05.000"))
			break
		}
	}
	for _, e := range c.events() {
		if e.Reason == "Topology" && eventTime(e).After(start.Add(-time.Second)) &&
			(strings.Contains(e.Message, "AddSlots") || strings.Contains(e.Message, "Migrate") || strings.Contains(e.Message, "Forget")) {
			t.Errorf("topology work on slots after the master was lost: %s", e.Message)
		}
	}
	if out := r.failuresOutside(start, c.staleRoutingEnd(ready)); len(out) > 0 {
		t.Errorf("%d writes failed outside the failover window (first: %s at %s)", len(out), out[0].err, out[0].at.Format("15:04:05.000"))
	}
	t.Logf("recovered in %.0fs; %s", ready.Sub(start).Seconds(), r)
}
