//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestScaling (label scaling): shards are added and removed under a write
// load without losing an acknowledged key (R7, R9).
func TestScaling(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	t.Run("out-in-3-5-3", func(t *testing.T) {
		t.Parallel()
		scenario(t, "scaling/out-in-3-5-3")
		c := newCluster(t, "scale-out-in", nil)
		c.checkGeneratedPassword(c.waitReady(5 * time.Minute))
		cl := c.clusterClient()
		w := startWriter(t, cl, "outin", writerOptions{})
		w.waitWrites(200, time.Minute)
		c.scaleTo(5, w)
		c.scaleTo(3, w)
		r := w.verify(c.clusterClient())
		t.Logf("scale out and in: %s", r)
	})

	// R7: another operator broke its cluster on exactly this sequence.
	t.Run("3-8-5", func(t *testing.T) {
		tier(t, tierAll) // 3-8-5-mid-flight makes the same steps (doc.go, Tiers)
		t.Parallel()
		scenario(t, "scaling/3-8-5")
		c := newCluster(t, "scale-3-8-5", nil)
		c.waitReady(5 * time.Minute)
		cl := c.clusterClient()
		w := startWriter(t, cl, "r7", writerOptions{})
		w.waitWrites(200, time.Minute)
		c.scaleTo(8, w)
		c.scaleTo(5, w)
		r := w.verify(c.clusterClient())
		t.Logf("3→8→5: %s", r)

		c.checkScaleEvents(8, 5)
	})

	// R7 again, the second step while the first still moves slots.
	t.Run("3-8-5-mid-flight", func(t *testing.T) {
		t.Parallel()
		scenario(t, "scaling/3-8-5-mid-flight")
		c := newCluster(t, "scale-mid-flight", nil)
		c.waitReady(5 * time.Minute)
		cl := c.clusterClient()
		w := startWriter(t, cl, "r7m", writerOptions{})
		w.waitWrites(200, time.Minute)
		start := time.Now()
		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 8 })
		// As soon as a new shard owns a slot (Redis's own view), change
		// the target again: the move to 8 is under way.
		anchor := c.nodeClient(c.pod(masterOf(c.get(), 0)).Status.PodIP, c.password())
		c.poll("moving slots to the new shards", 5*time.Minute, func() (bool, string) {
			newIPs := map[string]bool{}
			for _, p := range c.pods() {
				if shardOf(c.name, p.Name) >= 3 && p.Status.PodIP != "" {
					newIPs[p.Status.PodIP] = true
				}
			}
			ctx, cancel := redisCtx()
			out, err := anchor.ClusterNodes(ctx).Result()
			cancel()
			if err != nil {
				return false, err.Error()
			}
			moved := 0
			for _, n := range parseNodes(out) {
				if newIPs[n.IP()] {
					moved += n.Slots
				}
			}
			return moved > 0, fmt.Sprintf("new shards own %d slots; %s", moved, statusSummary(c.get()))
		})
		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 5 })
		rc := c.waitReady(10 * time.Minute)
		ids := c.checkConverged(rc)
		c.checkStatusShards(rc, ids)
		t.Logf("3→8→5 mid-flight in %.0fs", time.Since(start).Seconds())
		w.waitWrites(100, time.Minute)
		w.verify(c.clusterClient())
		c.checkScaleEvents(8, 5)
	})

	// R9: during a scale-in, the master receiving slots is killed
	// (kill -9) in the middle of a migration. The leaving shard is never
	// forgotten or deleted while it owns or has open slots, and the next
	// reconcile finishes the move.
	t.Run("in-kill-destination", func(t *testing.T) {
		t.Parallel()
		scenario(t, "scaling/in-kill-destination")
		c := newCluster(t, "scale-in-kill", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Shards = 4
			// Every write is on disk before Redis answers, so a kill -9
			// of a master that restarts at once loses no acknowledged
			// write, keys received through MIGRATE included.
			rc.Spec.Config = map[string]string{"appendfsync": "always"}
		})
		rc := c.waitReady(5 * time.Minute)
		leaving := resources.StatefulSetName(c.name, 3)
		cl := c.clusterClient()
		w := startWriter(t, cl, "r9", writerOptions{Wait: true})
		w.waitWrites(200, time.Minute)
		guard := startLeavingGuard(t, c, leaving)

		var destinations []string
		for i := 0; i < 3; i++ {
			destinations = append(destinations, masterOf(rc, i))
		}
		c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 3 })
		// Kill the first destination seen importing a slot.
		victim := c.waitImporting(destinations, 3*time.Minute)
		signalRedis(t, c.pod(victim).Status.PodIP, syscall.SIGKILL)

		rc = c.waitReady(10 * time.Minute)
		if violations := guard.result(); len(violations) > 0 {
			t.Errorf("the leaving shard was forgotten or deleted too early:\n%s", strings.Join(violations, "\n"))
		}
		ids := c.checkConverged(rc)
		c.checkStatusShards(rc, ids)
		w.waitWrites(100, time.Minute)
		r := w.verify(c.clusterClient())
		t.Logf("scale-in with a killed destination: %s", r)
	})
}

var shardRemovedRE = regexp.MustCompile(`^Shard (\S+) owns no slots`)

// checkScaleEvents checks from the events that each scale step ran once:
// the StatefulSet of each of the first `most` shards was created once,
// each shard from `final` on was removed once, and no shard that stays
// was ever removed.
func (c *cluster) checkScaleEvents(most, final int) {
	c.t.Helper()
	created, removed := map[string]int{}, map[string]int{}
	for _, e := range c.events() {
		switch e.Reason {
		case "ShardCreated":
			for _, name := range strings.Split(strings.TrimPrefix(e.Message, "Created StatefulSets "), ", ") {
				created[name] += eventCount(e)
			}
		case "ShardRemoved":
			if m := shardRemovedRE.FindStringSubmatch(e.Message); m != nil {
				removed[m[1]] += eventCount(e)
			} else {
				c.t.Errorf("ShardRemoved event with an unexpected message: %q", e.Message)
			}
		}
	}
	for i := 0; i < most; i++ {
		name := resources.StatefulSetName(c.name, i)
		if created[name] != 1 {
			c.t.Errorf("StatefulSet %s was created %d times, want once (events: %v)", name, created[name], created)
		}
		wantRemoved := 0
		if i >= final {
			wantRemoved = 1
		}
		if removed[name] != wantRemoved {
			c.t.Errorf("shard %s was removed %d times, want %d (events: %v)", name, removed[name], wantRemoved, removed)
		}
	}
}

// scaleTo sets spec.shards to n, waits for the Scaling phase and then for
// Ready, and checks the cluster and its status. The writer must make
// progress afterwards.
func (c *cluster) scaleTo(n int32, w *writer) {
	c.t.Helper()
	from := c.get().Spec.Shards
	start := time.Now()
	c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = n })
	rc := c.waitReady(10 * time.Minute)
	sawScaling := false
	for _, ob := range c.obs.since(start) {
		if ob.phase == cachev1beta1.PhaseScaling {
			sawScaling = true
		}
	}
	if !sawScaling {
		c.t.Errorf("scaling %d→%d: phase Scaling was never reported (seen: %s)", from, n, c.obs.phasesSince(start))
	}
	ids := c.checkConverged(rc)
	c.checkStatusShards(rc, ids)
	c.t.Logf("scaled %d→%d in %.0fs", from, n, time.Since(start).Seconds())
	w.waitWrites(100, time.Minute)
}

// waitImporting polls the masters' own CLUSTER NODES line until one of
// them shows an importing slot ([slot-<-id]) and returns its pod.
func (c *cluster) waitImporting(masters []string, timeout time.Duration) string {
	c.t.Helper()
	pw := c.password()
	clients := map[string]*redis.Client{}
	for _, m := range masters {
		clients[m] = c.nodeClient(c.pod(m).Status.PodIP, pw)
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, m := range masters {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			out, err := clients[m].ClusterNodes(ctx).Result()
			cancel()
			if err != nil {
				continue
			}
			if self, ok := myself(parseNodes(out)); ok {
				for _, o := range self.Open {
					if strings.Contains(o, "-<-") {
						c.t.Logf("%s is importing %s", m, o)
						return m
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no master of %v was seen importing a slot within %s: %s", masters, timeout, statusSummary(c.get()))
	return ""
}

// leavingGuard watches a leaving shard during a scale-in. Every 100 ms it
// reads CLUSTER NODES on every pod and the shard's StatefulSet, and
// records a violation when a node of the shard that (by its own last
// report) owns slots or has open slots is missing from another node's
// table (forgotten), or when the StatefulSet is deleted while it does.
type leavingGuard struct {
	c       *cluster
	shard   string
	mu      sync.Mutex
	violate []string
	cancel  context.CancelFunc
	done    chan struct{}
}

func startLeavingGuard(t *testing.T, c *cluster, shard string) *leavingGuard {
	ctx, cancel := context.WithCancel(context.Background())
	g := &leavingGuard{c: c, shard: shard, cancel: cancel, done: make(chan struct{})}
	go g.run(ctx, c.password())
	t.Cleanup(func() { g.cancel(); <-g.done })
	return g
}

func (g *leavingGuard) run(ctx context.Context, password string) {
	defer close(g.done)
	clients := map[string]*redis.Client{}
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	// busy: node ID of a leaving node → what it last said it owns.
	busy := map[string]string{}
	leavingIP := map[string]string{}
	ask := func(ip string) ([]nodeLine, error) {
		cl, ok := clients[ip]
		if !ok {
			cl = redis.NewClient(nodeOptions(ip, password))
			clients[ip] = cl
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		out, err := cl.ClusterNodes(rctx).Result()
		if err != nil {
			return nil, err
		}
		return parseNodes(out), nil
	}
	// report reads a leaving node's own line and records what it owns.
	report := func(ip string) {
		nodes, err := ask(ip)
		if err != nil {
			return
		}
		if self, ok := myself(nodes); ok {
			leavingIP[self.ID] = ip
			if self.Slots > 0 || len(self.Open) > 0 {
				busy[self.ID] = fmt.Sprintf("it owns %d slots, open %v", self.Slots, self.Open)
			} else {
				delete(busy, self.ID)
			}
		}
	}
	stsGone := false
	for ctx.Err() == nil {
		pods := g.c.podsQuiet()
		// The leaving shard's nodes first, then the others: a node
		// missing from a later table was forgotten after it reported.
		for _, p := range pods {
			if strings.HasPrefix(p.Name, g.shard+"-") && p.Status.PodIP != "" {
				report(p.Status.PodIP)
			}
		}
		now := time.Now().Format("15:04:05.000")
		for _, p := range pods {
			if strings.HasPrefix(p.Name, g.shard+"-") || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
				continue
			}
			nodes, err := ask(p.Status.PodIP)
			if err != nil {
				continue
			}
			known := map[string]bool{}
			for _, n := range nodes {
				known[n.ID] = true
			}
			for id := range busy {
				if known[id] {
					continue
				}
				// Ask the leaving node again: a move finished in
				// between is no violation.
				report(leavingIP[id])
				if now2, still := busy[id]; still {
					g.add(fmt.Sprintf("%s: %s forgot %s while %s", now, p.Name, id, now2))
				}
			}
		}
		if !stsGone && !g.c.statefulSetExists(g.shard) {
			stsGone = true
			for id := range busy {
				// Ask the leaving node again: what it said at the top of
				// this round may be older than the deletion (the round
				// asks every other node first, one of them perhaps just
				// killed).
				report(leavingIP[id])
				if what, still := busy[id]; still {
					g.add(fmt.Sprintf("%s: StatefulSet %s deleted while its node %s said %s", now, g.shard, id, what))
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (g *leavingGuard) add(v string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.violate) < 20 {
		g.violate = append(g.violate, v)
	}
}

func (g *leavingGuard) result() []string {
	g.cancel()
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.violate...)
}

// statefulSetExists reports whether the StatefulSet exists and is not
// being deleted; an API error counts as existing.
func (c *cluster) statefulSetExists(name string) bool {
	sts := &appsv1.StatefulSet{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := env.k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, sts)
	if apierrors.IsNotFound(err) {
		return false
	}
	return err != nil || sts.DeletionTimestamp == nil
}

// checkGeneratedPassword checks a cluster created without spec.auth: the
// operator generated its password (CredentialsReady GeneratedPassword, 43
// characters in its Secret) and every node refuses a client without it.
func (c *cluster) checkGeneratedPassword(rc *cachev1beta1.RedisCluster) {
	c.t.Helper()
	cond := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != cachev1beta1.RedisClusterGeneratedPasswordReason {
		c.t.Fatalf("CredentialsReady of a cluster without spec.auth: %+v", cond)
	}
	if n := len(c.password()); n != 43 {
		c.t.Fatalf("generated password of %d characters, want 43", n)
	}
	for _, p := range c.pods() {
		ctx, cancel := redisCtx()
		err := c.nodeClient(p.Status.PodIP, "").Ping(ctx).Err()
		cancel()
		if err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			c.t.Fatalf("PING without password on %s: %v, want NOAUTH", p.Name, err)
		}
	}
}
