//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestUpgrade (label upgrade), R11: a change that needs a restart rolls the
// pods shard by shard under a write load: replicas first, a planned
// CLUSTER FAILOVER before each master restarts, at most one pod per shard
// down, fewer than 1% failed writes and no acknowledged write lost.
func TestUpgrade(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	c := newCluster(t, "upgrade", nil)
	c.waitReady(5 * time.Minute)

	t.Run("image-tag", func(t *testing.T) {
		scenario(t, "upgrade/image-tag")
		c := c.with(t)
		c.rollingUpdate(t, "image", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Image = "redis:7.0.15" })
		for _, p := range c.pods() {
			if img := p.Spec.Containers[0].Image; img != "redis:7.0.15" {
				t.Fatalf("pod %s runs %s after the roll, want redis:7.0.15", p.Name, img)
			}
		}
	})

	t.Run("restart-only-config", func(t *testing.T) {
		scenario(t, "upgrade/restart-only-config")
		c := c.with(t)
		// tcp-backlog cannot change at run time (Redis 7.0 marks it
		// IMMUTABLE_CONFIG), so it takes a restart.
		c.rollingUpdate(t, "config", func(rc *cachev1beta1.RedisCluster) {
			if rc.Spec.Config == nil {
				rc.Spec.Config = map[string]string{}
			}
			rc.Spec.Config["tcp-backlog"] = "256"
		})
		c.checkConfigEverywhere("tcp-backlog", "256")
	})
}

// rollingUpdate changes the spec with mutate under a write load, waits
// for Ready and checks how the pods were rolled.
func (c *cluster) rollingUpdate(t *testing.T, prefix string, mutate func(*cachev1beta1.RedisCluster)) {
	t.Helper()
	rc := c.get()
	perShard := 1 + int(rc.Spec.ReplicasPerShard)
	original := map[string]types.UID{}
	for _, p := range c.pods() {
		original[p.Name] = p.UID
	}
	masters := map[int]string{}
	for i := range rc.Status.Shards {
		masters[i] = masterOf(rc, i)
	}
	failoversBefore := c.countEvents("Failover")

	cl := c.clusterClient()
	sampler := startPodSampler(t, c, perShard)
	w := startWriter(t, cl, "upgrade-"+prefix, writerOptions{})
	w.waitWrites(200, time.Minute)
	changed := time.Now()
	c.update(mutate)
	c.poll("Upgrading", 2*time.Minute, func() (bool, string) {
		for _, ob := range c.obs.since(changed) {
			if ob.phase == cachev1beta1.PhaseUpgrading {
				return true, ""
			}
		}
		return false, statusSummary(c.get())
	})
	rc = c.waitReady(10 * time.Minute)
	ready := time.Now()
	w.waitWrites(200, time.Minute)
	deletions, tooMany := sampler.result()
	r := w.verify(c.clusterClient())
	ids := c.checkConverged(rc)
	c.checkStatusShards(rc, ids)

	if len(tooMany) > 0 {
		t.Errorf("more than one pod of a shard was down at once:\n%s", strings.Join(tooMany, "\n"))
	}
	// Every pod restarted exactly once; in each shard the master last,
	// after it had become a replica (the planned failover came first).
	deleted := map[types.UID]int{}
	for _, d := range deletions {
		deleted[d.uid]++
		if _, ok := original[d.name]; !ok || original[d.name] != d.uid {
			t.Errorf("pod %s (%s) was deleted, but it is no pod from before the update: a pod restarted twice", d.name, d.uid)
		}
	}
	for name, uid := range original {
		if deleted[uid] != 1 {
			t.Errorf("pod %s was restarted %d times, want 1", name, deleted[uid])
		}
	}
	for shard, master := range masters {
		var order []string
		for _, d := range deletions {
			if shardOf(c.name, d.name) != shard {
				continue
			}
			order = append(order, fmt.Sprintf("%s(was %s)", d.name, d.lastRole))
			if d.name == master && d.lastRole != "slave" {
				t.Errorf("shard %d: master %s was deleted while it reported role %q: no failover before its restart", shard, master, d.lastRole)
			}
		}
		if len(order) == 0 || !strings.HasPrefix(order[len(order)-1], master+"(") {
			t.Errorf("shard %d: restart order %v, want the master %s last", shard, order, master)
		}
		t.Logf("shard %d restart order: %s", shard, strings.Join(order, ", "))
	}
	if n := c.countEvents("Failover") - failoversBefore; n != len(masters) {
		t.Errorf("%d Failover events during the roll, want one per shard (%d)", n, len(masters))
	}

	// Writes: under 1% failed, and only while the roll ran.
	if len(r.Failed)*100 >= r.Attempts {
		t.Errorf("%s: 1%% or more of the writes failed", r)
	}
	if out := r.failuresOutside(changed, c.staleRoutingEnd(ready)); len(out) > 0 {
		t.Errorf("%d writes failed outside the roll (first: %s at %s)", len(out), out[0].err, out[0].at.Format("15:04:05.000"))
	}
	t.Logf("roll took %.0fs; %s", ready.Sub(changed).Seconds(), r)
}

// countEvents sums the counts of the RedisCluster's events with reason.
func (c *cluster) countEvents(reason string) int {
	n := 0
	for _, e := range c.events() {
		if e.Reason == reason {
			n += eventCount(e)
		}
	}
	return n
}

// checkConfigEverywhere checks CONFIG GET key on every pod.
// configOn reports whether CONFIG GET key answers want on every pod but
// skip ("" skips none), and if not, which pod answered what.
func (c *cluster) configOn(key, want, skip string) (bool, string) {
	pw := c.password()
	for _, p := range c.pods() {
		if p.Name == skip {
			continue
		}
		ctx, cancel := redisCtx()
		got, err := c.nodeClient(p.Status.PodIP, pw).ConfigGet(ctx, key).Result()
		cancel()
		if err != nil || got[key] != want {
			return false, fmt.Sprintf("%s: %v %v", p.Name, got, err)
		}
	}
	return true, ""
}

func (c *cluster) checkConfigEverywhere(key, want string) {
	c.t.Helper()
	pw := c.password()
	for _, p := range c.pods() {
		ctx, cancel := redisCtx()
		got, err := c.nodeClient(p.Status.PodIP, pw).ConfigGet(ctx, key).Result()
		cancel()
		if err != nil {
			c.t.Fatalf("CONFIG GET %s on %s: %v", key, p.Name, err)
		}
		if got[key] != want {
			c.t.Fatalf("%s on %s is %q, want %q", key, p.Name, got[key], want)
		}
	}
}
