//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers"
)

// passBound is how long the operator may take to act on a spec change in
// the middle of a migration: the pass in flight runs the engine for at most
// --pass-budget, then finishes or rolls back its slot round (slowed down
// here), and the next pass sees the change.
const passBound = controllers.DefaultPassBudget + 20*time.Second

// TestMidMigration (label midmigration): spec.paused and a deletion take
// effect within one pass while slots move, and leave no slot open. The old
// masters are slowed down (stopped 80% of the time: a slow disk or a
// starved node), so the 3→6 scale-out lasts well beyond one pass.
func TestMidMigration(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	t.Run("pause", func(t *testing.T) {
		t.Parallel()
		scenario(t, "midmigration/pause")
		c := newCluster(t, "mid-pause", func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 0 })
		rc := c.waitReady(5 * time.Minute)
		keys := loadKeys(t, c.clusterClient(), "mp", 20000)
		slow := slowDown(t, oldMasterIPs(c, rc))
		defer slow.stop()

		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 6 })
		c.waitNewShardsOwnSlots(3, 5*time.Minute)
		paused := time.Now()
		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Paused = true })

		// Within one pass: the Paused condition is true for this
		// generation, no slot is open, and slots stop moving.
		var owned map[string]int
		c.poll("paused with no slot open and slots no longer moving", passBound, func() (bool, string) {
			rc := c.get()
			cond := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterPausedCondition)
			if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != rc.Generation {
				return false, "Paused condition not true yet: " + statusSummary(rc)
			}
			now, open := c.slotOwners()
			if len(open) > 0 {
				return false, "open slots: " + strings.Join(open, " ")
			}
			same := owned != nil && fmt.Sprint(now) == fmt.Sprint(owned)
			owned = now
			if !same {
				time.Sleep(2 * time.Second)
			}
			return same, fmt.Sprintf("slot owners %v", now)
		})
		took := time.Since(paused)
		onNew := 0
		for ip, n := range owned {
			if !slow.has(ip) {
				onNew += n
			}
		}
		if onNew >= 16384/2 {
			t.Fatalf("the new shards own %d slots: the scale-out had finished before the pause took effect, so nothing was tested", onNew)
		}
		t.Logf("paused %.0fs after spec.paused was set, with %d of about 8192 slots moved", took.Seconds(), onNew)

		// Paused means paused: 10 s later nothing moved.
		time.Sleep(10 * time.Second)
		if later, open := c.slotOwners(); fmt.Sprint(later) != fmt.Sprint(owned) || len(open) > 0 {
			t.Fatalf("slots moved while paused: %v, then %v (open %v)", owned, later, open)
		}

		slow.stop()
		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Paused = false })
		rc = c.waitReady(10 * time.Minute)
		ids := c.checkConverged(rc)
		c.checkStatusShards(rc, ids)
		if rc.Status.Migration != nil {
			t.Errorf("status.migration is still set on a Ready cluster: %+v", *rc.Status.Migration)
		}
		if lost, wrong := keys.check(t, c.clusterClient(), nil); len(lost)+len(wrong) > 0 {
			t.Errorf("after the pause and the rest of the scale-out: %d of %d keys lost, %d wrong (first: %v %v)",
				len(lost), keys.n, len(wrong), first(lost), first(wrong))
		}
	})

	t.Run("delete", func(t *testing.T) {
		t.Parallel()
		scenario(t, "midmigration/delete")
		c := newCluster(t, "mid-delete", func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 0 })
		rc := c.waitReady(5 * time.Minute)
		loadKeys(t, c.clusterClient(), "md", 20000)
		slow := slowDown(t, oldMasterIPs(c, rc))
		defer slow.stop()

		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 6 })
		c.waitNewShardsOwnSlots(3, 5*time.Minute)
		deleted := time.Now()
		if err := env.k8s.Delete(context.Background(), c.get()); err != nil {
			t.Fatalf("deleting the RedisCluster: %v", err)
		}
		// The finalizer's cleanup starts when the pass in flight ends.
		c.poll("RedisCluster gone", passBound, func() (bool, string) {
			err := env.k8s.Get(context.Background(), c.key(), &cachev1beta1.RedisCluster{})
			if apierrors.IsNotFound(err) {
				return true, ""
			}
			return false, fmt.Sprintf("still there (%v)", err)
		})
		t.Logf("deleted %.0fs after the delete request, in the middle of the scale-out", time.Since(deleted).Seconds())
	})
}

// oldMasterIPs are the pod IPs of the masters of shards 0–2.
func oldMasterIPs(c *cluster, rc *cachev1beta1.RedisCluster) []string {
	var ips []string
	for i := 0; i < 3; i++ {
		ips = append(ips, c.pod(masterOf(rc, i)).Status.PodIP)
	}
	return ips
}

// waitNewShardsOwnSlots polls until a shard at index from or above owns a
// slot in Redis's own view: the migration is under way.
func (c *cluster) waitNewShardsOwnSlots(from int, timeout time.Duration) {
	c.t.Helper()
	c.poll("slots moving to the new shards", timeout, func() (bool, string) {
		newIPs := map[string]bool{}
		for _, p := range c.pods() {
			if shardOf(c.name, p.Name) >= from && p.Status.PodIP != "" {
				newIPs[p.Status.PodIP] = true
			}
		}
		owners, _ := c.slotOwners()
		moved := 0
		for ip, n := range owners {
			if newIPs[ip] {
				moved += n
			}
		}
		return moved > 0, fmt.Sprintf("new shards own %d slots; %s", moved, statusSummary(c.get()))
	})
}

// slotOwners asks every pod for its own CLUSTER NODES line: slots owned by
// pod IP, and the open-slot markers ([slot->-id], [slot-<-id]) any node
// shows. A pod that does not answer is left out.
func (c *cluster) slotOwners() (map[string]int, []string) {
	owners := map[string]int{}
	var open []string
	for _, p := range c.pods() {
		if p.Status.PodIP == "" {
			continue
		}
		cl := c.nodeClient(p.Status.PodIP, c.password())
		ctx, cancel := redisCtx()
		out, err := cl.ClusterNodes(ctx).Result()
		cancel()
		_ = cl.Close()
		if err != nil {
			continue
		}
		if me, ok := myself(parseNodes(out)); ok {
			if me.Slots > 0 {
				owners[p.Status.PodIP] = me.Slots
			}
			for _, o := range me.Open {
				open = append(open, p.Name+" "+o)
			}
		}
	}
	sort.Strings(open)
	return owners, open
}

// slowed is a set of redis-server processes stopped (SIGSTOP) for 800 ms
// of every second, well below cluster-node-timeout, so nothing fails over
// but every command to them, MIGRATE included, crawls.
type slowed struct {
	ips  map[string]bool
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func slowDown(t testing.TB, ips []string) *slowed {
	t.Helper()
	s := &slowed{ips: map[string]bool{}, done: make(chan struct{})}
	var pids []int
	for _, ip := range ips {
		pid, err := redisPID(ip)
		if err != nil {
			t.Fatal(err)
		}
		s.ips[ip] = true
		pids = append(pids, pid)
	}
	signal := func(sig syscall.Signal) {
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer signal(syscall.SIGCONT)
		for {
			signal(syscall.SIGSTOP)
			select {
			case <-s.done:
				return
			case <-time.After(800 * time.Millisecond):
			}
			signal(syscall.SIGCONT)
			select {
			case <-s.done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *slowed) has(ip string) bool { return s.ips[ip] }

// stop resumes the processes for good; safe to call twice.
func (s *slowed) stop() {
	s.once.Do(func() { close(s.done) })
	s.wg.Wait()
}
