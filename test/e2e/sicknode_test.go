//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// TestSickNode (label disruptive), issue 14 item 5: one replica pod of a
// 3×1 cluster can never run (its image cannot be pulled); the cluster
// still scales 3→4 under writes with WAIT 1: every slot is served by 4 masters in an even split, the
// status names the sick pod and why, a live config change reaches every
// node that runs, and once the pod is repaired the cluster is Ready with
// every acknowledged key readable and the new config on every node. Then a
// 3×2 cluster whose replica at ordinal 2 cannot run goes to 3×1: the
// scale-down removes that replica at once, and the cluster is Ready with
// every acknowledged key readable and no pod or claim of ordinal 2 left.
func TestSickNode(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	t.Run("scale-out-with-a-sick-replica", func(t *testing.T) {
		scenario(t, "disruptive/sick-replica-scale-out")
		c := newCluster(t, "sick-node", nil)
		rc := c.waitReady(5 * time.Minute)
		w := startWriter(t, c.clusterClient(), "sick", writerOptions{Wait: true})
		w.waitWrites(100, time.Minute)

		sick := rc.Status.Shards[1].ReplicaPods[0]
		repair := c.breakPod(sick)
		c.poll("the sick pod's redis container not running", 3*time.Minute, func() (bool, string) {
			p := c.pod(sick)
			for _, st := range p.Status.ContainerStatuses {
				if st.Name == resources.RedisContainerName {
					return st.State.Waiting != nil && !podIsReady(p), fmt.Sprintf("%s: %+v, ready %v", sick, st.State, podIsReady(p))
				}
			}
			return false, sick + ": no redis container status"
		})

		// Degraded at once, naming the pod and why it cannot run: not
		// "not ready for more than 2m", the wait for a pod still starting.
		c.poll("Degraded naming the sick pod as one that cannot run", time.Minute, func() (bool, string) {
			rc := c.get()
			cond := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterDegradedCondition)
			if cond == nil {
				return false, "no Degraded condition"
			}
			want := "Pods that cannot run: pod " + sick + " (cannot pull image registry.invalid/no-such-image:1)"
			return cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, want) && rc.Status.Phase == cachev1beta1.PhaseDegraded,
				fmt.Sprintf("phase %s, Degraded %s: %s", rc.Status.Phase, cond.Status, cond.Message)
		})

		start := time.Now()
		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 4 })
		named := ""
		c.poll("scaled to 4 shards with the sick pod", 5*time.Minute, func() (bool, string) {
			rc := c.get()
			named = ""
			for _, cond := range rc.Status.Conditions {
				if strings.Contains(cond.Message, "pod "+sick+" (") {
					named = cond.Type + ": " + cond.Message
				}
			}
			ok, why := c.evenSplit(rc, 4)
			return ok && named != "", fmt.Sprintf("%s; sick pod named: %q", why, named)
		})
		t.Logf("scaled 3→4 with %s sick in %.0fs; %s", sick, time.Since(start).Seconds(), named)
		if isReady(c.get()) {
			t.Error("Ready while a pod cannot start")
		}
		// Writes to the keys of the sick pod's shard wait in vain for a
		// replica (WAIT 1 gives up after 2 s, a few times): few, but some,
		// are acknowledged.
		w.waitWrites(20, 3*time.Minute)

		// A live config change reaches every node that runs while the sick
		// pod does not (it used to wait for a converged cluster).
		c.update(func(rc *cachev1beta1.RedisCluster) {
			if rc.Spec.Config == nil {
				rc.Spec.Config = map[string]string{}
			}
			rc.Spec.Config["maxmemory-policy"] = "allkeys-lru"
		})
		c.poll("maxmemory-policy allkeys-lru on every node that runs", 2*time.Minute, func() (bool, string) {
			return c.configOn("maxmemory-policy", "allkeys-lru", sick)
		})

		repair()
		rc = c.waitReady(5 * time.Minute)
		ids := c.checkConverged(rc)
		c.checkStatusShards(rc, ids)
		c.checkConfigEverywhere("maxmemory-policy", "allkeys-lru")
		w.verify(c.clusterClient())
	})

	// Lowering replicasPerShard is how a person gets rid of a replica that
	// cannot run: the scale-down must not wait for that replica (it used to
	// wait for a converged cluster, which the sick pod never allows).
	t.Run("replica-scale-down-removes-a-sick-replica", func(t *testing.T) {
		scenario(t, "disruptive/sick-replica-scale-down")
		c := newCluster(t, "sick-down", func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 2 })
		rc := c.waitReady(5 * time.Minute)
		w := startWriter(t, c.clusterClient(), "down", writerOptions{Wait: true})
		w.waitWrites(100, time.Minute)
		sick := ""
		for _, sh := range rc.Status.Shards {
			if i := slices.IndexFunc(sh.ReplicaPods, func(p string) bool { return strings.HasSuffix(p, "-2") }); i >= 0 {
				sick = sh.ReplicaPods[i]
				break
			}
		}
		if sick == "" {
			t.Fatalf("no replica at ordinal 2 in %+v", rc.Status.Shards)
		}
		c.breakPod(sick)
		c.poll("Degraded naming the sick pod", 2*time.Minute, func() (bool, string) {
			cond := meta.FindStatusCondition(c.get().Status.Conditions, cachev1beta1.RedisClusterDegradedCondition)
			return cond != nil && cond.Status == metav1.ConditionTrue && strings.Contains(cond.Message, "pod "+sick+" ("), fmt.Sprintf("%+v", cond)
		})

		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 1 })
		rc = c.waitReady(5 * time.Minute)
		ids := c.checkConverged(rc)
		c.checkStatusShards(rc, ids)
		c.poll("no pod or claim of ordinal 2 left", 2*time.Minute, func() (bool, string) {
			var left []string
			for _, p := range c.pods() {
				if strings.HasSuffix(p.Name, "-2") {
					left = append(left, "pod "+p.Name)
				}
			}
			for _, pvc := range c.claims() {
				if strings.HasSuffix(pvc.Name, "-2") {
					left = append(left, "claim "+pvc.Name)
				}
			}
			return len(left) == 0, strings.Join(left, ", ")
		})
		w.verify(c.clusterClient())
	})
}

// breakPod makes pod's redis container unable to run: its image becomes
// one the plane cannot run (a live pod's image may change; the node stops
// the container and waits with ErrImagePull, as a kubelet would for an
// image it cannot pull), while the pod keeps its template hash, so no
// rolling update replaces it. The returned func deletes the pod: its
// StatefulSet starts it again from the template, on its volume.
func (c *cluster) breakPod(pod string) func() {
	c.t.Helper()
	p := c.pod(pod)
	idx := slices.IndexFunc(p.Spec.Containers, func(ct corev1.Container) bool { return ct.Name == resources.RedisContainerName })
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/containers/%d/image","value":"registry.invalid/no-such-image:1"}]`, idx)
	if err := env.k8s.Patch(context.Background(), p, client.RawPatch(types.JSONPatchType, []byte(patch))); err != nil {
		c.t.Fatalf("breaking pod %s: %v", pod, err)
	}
	return func() {
		c.t.Helper()
		c.deletePod(pod)
	}
}

// deletePod deletes pod and waits until its StatefulSet made a new one.
func (c *cluster) deletePod(name string) {
	c.t.Helper()
	old := c.pod(name).UID
	p := &corev1.Pod{}
	p.Namespace, p.Name = c.ns, name
	if err := env.k8s.Delete(context.Background(), p); err != nil {
		c.t.Fatalf("deleting pod %s: %v", name, err)
	}
	c.poll("pod "+name+" re-created", 2*time.Minute, func() (bool, string) {
		for _, p := range c.pods() {
			if p.Name == name && p.UID != old && p.DeletionTimestamp == nil {
				return true, ""
			}
		}
		return false, "old pod " + string(old) + " still there"
	})
}

// evenSplit reports whether Redis itself (CLUSTER NODES of the first
// shard's master) has every slot served by exactly shards masters, the
// desired shards' masters of status, each owning NumSlots/shards (±1),
// with no slot open and cluster_state ok.
func (c *cluster) evenSplit(rc *cachev1beta1.RedisCluster, shards int) (bool, string) {
	if len(rc.Status.Shards) != shards {
		return false, fmt.Sprintf("status lists %d shards", len(rc.Status.Shards))
	}
	want := map[string]bool{}
	for _, sh := range rc.Status.Shards {
		if sh.MasterPod == "" {
			return false, "shard " + sh.Name + " has no master in status"
		}
		p := c.pod(sh.MasterPod)
		if p == nil || p.Status.PodIP == "" {
			return false, "master " + sh.MasterPod + " has no IP"
		}
		want[addr(p.Status.PodIP)] = true
	}
	ip := c.pod(rc.Status.Shards[0].MasterPod).Status.PodIP
	cl := c.nodeClient(ip, c.password())
	defer cl.Close()
	ctx, cancel := redisCtx()
	defer cancel()
	out, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return false, err.Error()
	}
	info, err := cl.ClusterInfo(ctx).Result()
	if err != nil {
		return false, err.Error()
	}
	if st := infoMap(info)["cluster_state"]; st != "ok" {
		return false, "cluster_state " + st
	}
	total := 0
	lo, hi := topology.NumSlots/shards, (topology.NumSlots+shards-1)/shards
	for _, n := range parseNodes(out) {
		if len(n.Open) > 0 {
			return false, fmt.Sprintf("%s has open slots %v", n.Addr, n.Open)
		}
		if n.Slots == 0 {
			continue
		}
		host, _, _ := strings.Cut(n.Addr, "@")
		if !want[host] {
			return false, fmt.Sprintf("%s owns %d slots and is no desired shard's master", host, n.Slots)
		}
		if n.Slots < lo || n.Slots > hi {
			return false, fmt.Sprintf("%s owns %d slots, want %d..%d", host, n.Slots, lo, hi)
		}
		total += n.Slots
	}
	return total == topology.NumSlots, fmt.Sprintf("%d slots served", total)
}
