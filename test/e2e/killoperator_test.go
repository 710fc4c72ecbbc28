//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// killKeys is how many keys each scenario loads before it scales, so the
// migration moves keys in every slot round and lasts long enough for the
// kills to land inside it.
const killKeys = 100000

// killCount is how many times the operator is SIGKILLed during one scale.
const killCount = 10

// TestOperatorKilled (label operator-killed), issue 14 part 3: the
// operator process is killed with SIGKILL at 10 random moments of a 3→6
// scale-out and of a 6→3 scale-in, under a writer that counts a write as
// acknowledged once `WAIT 1` confirms a replica has it, and restarted each
// time. Each scale must end Ready with exactly the desired masters, all
// 16384 slots assigned, no slot importing or migrating on any node, every
// loaded key and every acknowledged write readable. The scale-out is also
// stopped once with SIGTERM while a slot round is open: the process must
// exit (status 0) within the Deployment's terminationGracePeriodSeconds,
// leaving no slot open, and the scale completes after a restart.
//
// The kill moments come from a seeded math/rand: each scenario logs
// `seed N` and every kill; E2E_KILL_SEED=N replays them (the moments are
// positions in the migration, so a replay on a busier machine kills at the
// same points of the move, not at the same seconds).
func TestOperatorKilled(t *testing.T) {
	tier(t, tierCI)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("E2E_KILL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("E2E_KILL_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (replay with E2E_KILL_SEED=%d)", seed, seed)
	t.Run("scale-out-3-6", func(t *testing.T) {
		testKilledScale(t, "operator-killed/scale-out-3-6", rand.New(rand.NewPCG(seed, 1)), 3, 6, true)
	})
	t.Run("scale-in-6-3", func(t *testing.T) {
		tier(t, tierAll) // scale-out-3-6 kills it the same way (doc.go, Tiers)
		testKilledScale(t, "operator-killed/scale-in-6-3", rand.New(rand.NewPCG(seed, 2)), 6, 3, false)
	})
}

// testKilledScale is the scenario name: a cluster of from shards scaled
// to `to`, killCount kills (and, with term, one SIGTERM) at moments drawn
// from rng.
func testKilledScale(t *testing.T, name string, rng *rand.Rand, from, to int32, term bool) {
	scenario(t, name)
	c := newCluster(t, fmt.Sprintf("killed-%d-%d", from, to), func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = from })
	rc := c.waitReady(5 * time.Minute)
	cl := c.clusterClient()
	keys := loadKeys(t, cl, "kill", killKeys)
	w := startWriter(t, cl, "killw", writerOptions{Wait: true})
	w.waitWrites(200, time.Minute)

	probe := newSlotProbe(c, rc, from, to)
	points := killSchedule(rng, term)
	for i, p := range points {
		t.Logf("moment %d: %s", i+1, p)
	}
	start := time.Now()
	c.update(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = to })
	restarted, base := start, 0.0
	hitOpen := 0
	termNote := ""
	for i, p := range points {
		probe.waitMoment(p, restarted, base, 3*time.Minute)
		if p.term {
			took := c.terminateMidRound(probe)
			termNote = fmt.Sprintf(", SIGTERM exit in %.1fs", took.Seconds())
		} else {
			killOperator(t)
			open, _ := c.openSlots() // a new pod may not answer yet
			if len(open) > 0 {
				hitOpen++
			}
			t.Logf("moment %d, SIGKILL at %.1fs: %.0f%% of the slots moved, open then: %s", i+1, time.Since(start).Seconds(),
				100*probe.progress(), summarizeOpen(open))
		}
		base = probe.progress()
		startOperator(t)
		restarted = time.Now()
	}

	rc = c.waitReady(4 * time.Minute)
	ids := c.checkConverged(rc)
	c.checkStatusShards(rc, ids)
	fmt.Printf("e2e: %s %d kills (%d with a slot open)%s, Ready %.0fs after the scale began\n",
		name, killCount, hitOpen, termNote, time.Since(start).Seconds())

	w.waitWrites(100, time.Minute)
	r := w.result()
	fresh := c.clusterClient()
	loadedLost, loadedWrong := keys.check(t, fresh, nil)
	ackedLost, ackedWrong := w.readBack(fresh, r.Acked)
	reportKeys(name, keys.n, len(loadedLost)+len(loadedWrong), r, len(ackedLost)+len(ackedWrong))
	if len(loadedLost)+len(loadedWrong) > 0 {
		t.Errorf("%d of %d loaded keys lost (first %s), %d with another value (first %s)",
			len(loadedLost), keys.n, first(loadedLost), len(loadedWrong), first(loadedWrong))
	}
	if len(ackedLost)+len(ackedWrong) > 0 {
		t.Errorf("%s; %d acknowledged keys lost (first %s), %d with another value (first %s)",
			r, len(ackedLost), first(ackedLost), len(ackedWrong), first(ackedWrong))
	}
}

// killPoint is one moment of a schedule. With at ≤ 0 the operator is
// stopped delay after its last start, whatever the migration's state (so
// also while it starts, while the new pods start or while the nodes
// meet). Otherwise it is stopped delay after it has moved slots itself
// (since its last start) and at least the fraction at of the slots to move
// have moved, or once the cluster is Ready: a kill in the middle of the
// migration it runs, not before it looked at the cluster.
type killPoint struct {
	at    float64
	delay time.Duration
	term  bool // SIGTERM (once a slot round is open) instead of SIGKILL
}

func (p killPoint) String() string {
	sig := "SIGKILL"
	if p.term {
		sig = "SIGTERM"
	}
	if p.at <= 0 {
		return fmt.Sprintf("%s %.2fs after the last start", sig, p.delay.Seconds())
	}
	return fmt.Sprintf("%s %.2fs after %.1f%% of the slots moved", sig, p.delay.Seconds(), 100*p.at)
}

// killSchedule draws killCount kill moments, and one SIGTERM between 30%
// and 70% of the move when term is set, in the order they happen: at
// uniform in [-0.1, 0.95); delay uniform in [0.3 s, 3 s] for at ≤ 0, in
// [0, 0.25 s] otherwise (a pass moves many rounds in a second). The last 5%
// of the move are left out so that a schedule never waits for a slot count
// the planner's rounding may not reach.
func killSchedule(rng *rand.Rand, term bool) []killPoint {
	var points []killPoint
	for range killCount {
		p := killPoint{at: -0.1 + 1.05*rng.Float64()}
		if p.at <= 0 {
			p.delay = 300*time.Millisecond + time.Duration(rng.Int64N(int64(2700*time.Millisecond)))
		} else {
			p.delay = time.Duration(rng.Int64N(int64(250 * time.Millisecond)))
		}
		points = append(points, p)
	}
	if term {
		points = append(points, killPoint{at: 0.3 + 0.4*rng.Float64(), term: true})
	}
	slices.SortStableFunc(points, func(a, b killPoint) int { return cmp.Compare(a.at, b.at) })
	return points
}

// waitMoment polls the migration every 25 ms until k is reached, base
// being the fraction moved when the operator last started (at restarted),
// and sleeps k's delay; it fails c.t after timeout.
func (p *slotProbe) waitMoment(k killPoint, restarted time.Time, base float64, timeout time.Duration) {
	p.c.t.Helper()
	if k.at <= 0 {
		time.Sleep(time.Until(restarted.Add(k.delay)))
		return
	}
	deadline := time.Now().Add(timeout)
	for {
		moved := p.progress()
		if moved > base && moved >= k.at {
			break
		}
		if moved >= k.at && isReady(p.c.get()) {
			break // the move ended before this operator moved a slot
		}
		if time.Now().After(deadline) {
			p.c.t.Fatalf("not at %s within %s: %.1f%% of the slots moved (%.1f%% when the operator started); %s",
				k, timeout, 100*moved, 100*base, statusSummary(p.c.get()))
		}
		time.Sleep(25 * time.Millisecond)
	}
	time.Sleep(k.delay)
}

// summarizeOpen condenses openSlots' markers to "pod: n open (first
// marker)" per pod.
func summarizeOpen(open []string) string {
	if len(open) == 0 {
		return "none"
	}
	var pods []string
	count, firstOf := map[string]int{}, map[string]string{}
	for _, o := range open {
		pod, marker, _ := strings.Cut(o, ": ")
		if count[pod] == 0 {
			pods = append(pods, pod)
			firstOf[pod] = marker
		}
		count[pod]++
	}
	out := make([]string, len(pods))
	for i, pod := range pods {
		out[i] = fmt.Sprintf("%s: %d open (first %s)", pod, count[pod], firstOf[pod])
	}
	return strings.Join(out, ", ")
}

// terminateMidRound waits (up to 10 s) until a source master of the move
// has a slot migrating, stops the operator with SIGTERM and checks that it
// exited with status 0 within the Deployment's termination grace period
// and that no node has a slot open right after. It returns how long the
// exit took.
func (c *cluster) terminateMidRound(probe *slotProbe) time.Duration {
	c.t.Helper()
	grace := managerGracePeriod(c.t)
	seen := probe.waitMigrating(10 * time.Second)
	logFrom := opLogOffset(c.t)
	took, inTime, err := terminateOperator(c.t, grace)
	open, silent := c.openSlots()
	settled := operatorLog(c.t, logFrom, c.ns, "settling the round in flight")
	c.t.Logf("SIGTERM (slot open before: %s): exited after %.1fs (%v), %d settle lines, open after: %s",
		seen, took.Seconds(), err, len(settled), summarizeOpen(open))
	if !inTime {
		c.t.Errorf("the operator did not exit within the termination grace period (%s) of SIGTERM", grace)
	}
	if err != nil {
		c.t.Errorf("the operator exited with %v after SIGTERM, want status 0 (the manager's runnables stopped within its graceful shutdown timeout)", err)
	}
	if len(open) > 0 {
		c.t.Errorf("slots left open by the operator stopped with SIGTERM: %s", summarizeOpen(open))
	}
	if len(silent) > 0 {
		c.t.Errorf("pods that did not answer CLUSTER NODES after the SIGTERM: %s", strings.Join(silent, ", "))
	}
	return took
}

// managerGracePeriod is terminationGracePeriodSeconds of the operator's
// Deployment (kustomize/base/manager/manager.yaml).
func managerGracePeriod(t testing.TB) time.Duration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.root, "kustomize", "base", "manager", "manager.yaml"))
	if err != nil {
		t.Fatalf("reading the manager's Deployment: %v", err)
	}
	d := &appsv1.Deployment{}
	if err := yaml.Unmarshal(b, d); err != nil {
		t.Fatalf("parsing the manager's Deployment: %v", err)
	}
	if d.Spec.Template.Spec.TerminationGracePeriodSeconds == nil {
		t.Fatal("the manager's Deployment sets no terminationGracePeriodSeconds")
	}
	return time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
}

// openSlots lists every importing or migrating marker ([slot-<-id],
// [slot->-id]) in the CLUSTER NODES output of every pod of the cluster
// that runs on an address and is not being deleted, as "pod: marker", and
// the pods that did not answer, as "pod: error".
func (c *cluster) openSlots() (open, silent []string) {
	c.t.Helper()
	pw := c.password()
	for _, p := range c.pods() {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		cl := redis.NewClient(nodeOptions(p.Status.PodIP, pw))
		ctx, cancel := redisCtx()
		nodes, err := cl.ClusterNodes(ctx).Result()
		cancel()
		_ = cl.Close()
		if err != nil {
			silent = append(silent, p.Name+": "+err.Error())
			continue
		}
		for _, n := range parseNodes(nodes) {
			for _, o := range n.Open {
				open = append(open, p.Name+": "+o)
			}
		}
	}
	return open, silent
}

// slotProbe follows a scale's migration in the CLUSTER NODES of shard 0's
// master (shard 0 stays either way): how many slots the shards from index
// min(from, to) on own, the new shards of a scale-out or the leaving ones
// of a scale-in.
type slotProbe struct {
	c        *cluster
	anchor   *redis.Client
	sources  []*redis.Client // the masters giving slots away
	from, to int32
	total    int // slots to move

	ipShard   map[string]int
	refreshed time.Time
	last      float64
}

func newSlotProbe(c *cluster, rc *cachev1beta1.RedisCluster, from, to int32) *slotProbe {
	c.t.Helper()
	pw := c.password()
	p := &slotProbe{c: c, anchor: c.nodeClient(c.pod(masterOf(rc, 0)).Status.PodIP, pw), from: from, to: to}
	for i := range int(from) {
		if to > from || int32(i) >= to {
			p.sources = append(p.sources, c.nodeClient(c.pod(masterOf(rc, i)).Status.PodIP, pw))
		}
	}
	if to > from {
		p.total = numSlots * int(to-from) / int(to)
	} else if p.total = p.owned(); p.total == 0 {
		c.t.Fatalf("the shards to remove own no slots before the scale-in")
	}
	return p
}

// owned is how many slots the shards from index min(from, to) on own in
// the anchor's view, -1 when it does not answer.
func (p *slotProbe) owned() int {
	if time.Since(p.refreshed) > time.Second {
		p.ipShard = map[string]int{}
		for _, pod := range p.c.podsQuiet() {
			if pod.Status.PodIP != "" {
				p.ipShard[pod.Status.PodIP] = shardOf(p.c.name, pod.Name)
			}
		}
		p.refreshed = time.Now()
	}
	ctx, cancel := redisCtx()
	out, err := p.anchor.ClusterNodes(ctx).Result()
	cancel()
	if err != nil {
		return -1
	}
	n := 0
	for _, line := range parseNodes(out) {
		if s, ok := p.ipShard[line.IP()]; ok && s >= int(min(p.from, p.to)) && line.has("master") {
			n += line.Slots
		}
	}
	return n
}

// progress is the fraction of the slots to move that have moved, as last
// seen (the last value when the anchor does not answer).
func (p *slotProbe) progress() float64 {
	n := p.owned()
	if n < 0 {
		return p.last
	}
	if p.to > p.from {
		p.last = float64(n) / float64(p.total)
	} else {
		p.last = 1 - float64(n)/float64(p.total)
	}
	return p.last
}

// waitMigrating polls the source masters every 20 ms until one has a slot
// migrating and returns its marker, or "none" after timeout.
func (p *slotProbe) waitMigrating(timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, cl := range p.sources {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			out, err := cl.ClusterNodes(ctx).Result()
			cancel()
			if err != nil {
				continue
			}
			if self, ok := myself(parseNodes(out)); ok {
				for _, o := range self.Open {
					if strings.Contains(o, "->-") {
						return o
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "none"
}
