//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// numSlots is the number of hash slots of a Redis Cluster (Redis Cluster
// specification, "Key distribution model").
const numSlots = 16384

// cluster is one RedisCluster of a scenario, in its own namespace.
type cluster struct {
	t        testing.TB
	ns, name string

	obs *statusObserver
	// tls, when set, is how clusterClient and nodeClient speak TLS to a
	// cluster with spec.tls (see tls_test.go).
	tls *tls.Config
}

// scenario prints `e2e: <name> start` now and `e2e: <name> <seconds>s
// ok|FAIL|skip` when t ends (counted in the run's summary, tiers_test.go),
// and fails t early if the operator process died. t must run under a tier
// declaration (tier, in its own test or a parent).
func scenario(t *testing.T, name string) {
	t.Helper()
	if scenarioTier(t) == nil {
		t.Fatalf("scenario %s (%s) is in no tier: its top-level test must start with tier(t, tierCI) or tier(t, tierAll)", name, t.Name())
	}
	fmt.Printf("e2e: %s start\n", name)
	start := time.Now()
	t.Cleanup(func() {
		result := "ok"
		switch {
		case t.Failed():
			result = "FAIL"
		case t.Skipped():
			result = "skip"
		}
		scenarioEnded(t, result)
		fmt.Printf("e2e: %s %.0fs %s\n", name, time.Since(start).Seconds(), result)
	})
	checkOperator(t)
}

// newCluster creates the RedisCluster name in namespace e2e-<name>: 3
// shards × 1 replica of redis:7.0 unless mutate says otherwise, claims
// deleted with the cluster. When t ends it dumps what a person needs to
// debug a failure, then deletes the cluster and whatever claims remain.
func newCluster(t testing.TB, name string, mutate func(*cachev1beta1.RedisCluster)) *cluster {
	t.Helper()
	ctx := context.Background()
	c := &cluster{t: t, ns: "e2e-" + name, name: name}
	if err := ensureNamespace(ctx, c.ns); err != nil {
		t.Fatalf("creating namespace %s: %v", c.ns, err)
	}
	size := resource.MustParse("64Mi")
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec: cachev1beta1.RedisClusterSpec{
			Shards:           3,
			ReplicasPerShard: 1,
			Image:            "redis:7.0",
			Storage:          cachev1beta1.StorageSpec{Size: &size, DeleteClaimPolicy: cachev1beta1.DeleteClaimDelete},
		},
	}
	if mutate != nil {
		mutate(rc)
	}
	c.track()
	if err := env.k8s.Create(ctx, rc); err != nil {
		t.Fatalf("creating RedisCluster %s/%s: %v", c.ns, name, err)
	}
	return c
}

// track starts c's status observer and, when c.t ends, dumps what a
// person needs to debug a failure, then deletes the cluster and whatever
// claims remain: for a RedisCluster a scenario creates itself.
func (c *cluster) track() {
	c.obs = startObserver(c)
	c.t.Cleanup(func() {
		c.obs.stop()
		if c.t.Failed() {
			c.dumpDebug()
		}
		c.destroy()
	})
}

// with is c for a subtest: failures are reported on t.
func (c *cluster) with(t *testing.T) *cluster {
	cc := *c
	cc.t = t
	return &cc
}

func (c *cluster) key() client.ObjectKey { return client.ObjectKey{Namespace: c.ns, Name: c.name} }

// get reads the RedisCluster.
func (c *cluster) get() *cachev1beta1.RedisCluster {
	c.t.Helper()
	rc := &cachev1beta1.RedisCluster{}
	if err := env.k8s.Get(context.Background(), c.key(), rc); err != nil {
		c.t.Fatalf("reading RedisCluster %s: %v", c.key(), err)
	}
	return rc
}

// update applies mutate to the latest RedisCluster, retrying on conflict.
func (c *cluster) update(mutate func(*cachev1beta1.RedisCluster)) {
	c.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rc := &cachev1beta1.RedisCluster{}
		if err := env.k8s.Get(context.Background(), c.key(), rc); err != nil {
			return err
		}
		mutate(rc)
		return env.k8s.Update(context.Background(), rc)
	})
	if err != nil {
		c.t.Fatalf("updating RedisCluster %s: %v", c.key(), err)
	}
}

// isReady reports whether rc is Ready for its current generation.
func isReady(rc *cachev1beta1.RedisCluster) bool {
	cond := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterReadyCondition)
	return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == rc.Generation &&
		rc.Status.ObservedGeneration == rc.Generation && rc.Status.Phase == cachev1beta1.PhaseReady
}

// waitReady polls until the RedisCluster is Ready for its current
// generation and returns it.
func (c *cluster) waitReady(timeout time.Duration) *cachev1beta1.RedisCluster {
	c.t.Helper()
	var rc *cachev1beta1.RedisCluster
	c.poll("Ready", timeout, func() (bool, string) {
		rc = c.get()
		return isReady(rc), statusSummary(rc)
	})
	return rc
}

// poll calls cond every 200 ms until it reports true, failing t with the
// last message after timeout. It also fails early if the operator died.
func (c *cluster) poll(what string, timeout time.Duration, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		checkOperator(c.t)
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: not %s within %s: %s", c.key(), what, timeout, msg)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitReadyAfter polls until the RedisCluster is Ready in a status written
// after since, and returns it: its Ready condition turned True after since
// (lastTransitionTime has whole seconds, so one after since is), or the
// status observer saw it not Ready from since on. Right after a disruption
// the status read may still be the one written before it: a pass writes
// its status when it ends, up to the engine's wait budget later.
func (c *cluster) waitReadyAfter(since time.Time, timeout time.Duration) *cachev1beta1.RedisCluster {
	c.t.Helper()
	var rc *cachev1beta1.RedisCluster
	c.poll("Ready again", timeout, func() (bool, string) {
		// What the observer saw before this read: a not-Ready it records
		// after the read cannot vouch for the Ready read.
		seen := c.obs.since(since)
		rc = c.get()
		if !isReady(rc) {
			return false, statusSummary(rc)
		}
		if cond := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterReadyCondition); cond.LastTransitionTime.After(since) {
			return true, ""
		}
		for _, ob := range seen {
			if ob.cond(cachev1beta1.RedisClusterReadyCondition) != metav1.ConditionTrue {
				return true, ""
			}
		}
		return false, "Ready, but still as written before " + since.Format(time.TimeOnly) + ": " + statusSummary(rc)
	})
	return rc
}

// statusSummary is a one-line view of the status for failure messages.
func statusSummary(rc *cachev1beta1.RedisCluster) string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d observed %d phase %q", rc.Generation, rc.Status.ObservedGeneration, rc.Status.Phase)
	for _, cond := range rc.Status.Conditions {
		fmt.Fprintf(&b, "; %s=%s (%s: %s)", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	return b.String()
}

// pods lists the cluster's Redis pods, sorted by name.
func (c *cluster) pods() []corev1.Pod {
	c.t.Helper()
	var list corev1.PodList
	if err := env.k8s.List(context.Background(), &list, client.InNamespace(c.ns),
		client.MatchingLabels{resources.LabelCluster: c.name}); err != nil {
		c.t.Fatalf("listing pods: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// podsQuiet lists the cluster's pods for a background goroutine, which
// must not fail the test: nil on error.
func (c *cluster) podsQuiet() []corev1.Pod {
	var list corev1.PodList
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := env.k8s.List(ctx, &list, client.InNamespace(c.ns), client.MatchingLabels{resources.LabelCluster: c.name}); err != nil {
		return nil
	}
	return list.Items
}

// pod reads one pod.
func (c *cluster) pod(name string) *corev1.Pod {
	c.t.Helper()
	p := &corev1.Pod{}
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: name}, p); err != nil {
		c.t.Fatalf("reading pod %s: %v", name, err)
	}
	return p
}

func podIsReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// password is the password in the operator-owned Secret, "" without auth.
func (c *cluster) password() string {
	c.t.Helper()
	s := &corev1.Secret{}
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: resources.SecretName(c.name)}, s); err != nil {
		c.t.Fatalf("reading the operator's Secret: %v", err)
	}
	return string(s.Data[resources.PasswordKey])
}

// clientReloadInterval is how often the suite's cluster clients reload
// their slot map when nothing redirected them (clusterClient).
const clientReloadInterval = 10 * time.Second

// clusterClient is a go-redis cluster client seeded with every pod's
// address; it discovers the slots itself (CLUSTER SLOTS) and is closed when
// the test ends.
func (c *cluster) clusterClient(mutate ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	c.t.Helper()
	var addrs []string
	for _, p := range c.pods() {
		if p.Status.PodIP != "" {
			addrs = append(addrs, addr(p.Status.PodIP))
		}
	}
	// The client Service is a seed too, as it is for applications: once
	// every pod has moved (a drain of each node) all the pod IPs above are
	// gone, and go-redis falls back to its seeds when no node it knew
	// answers.
	var svc corev1.Service
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: resources.ClientServiceName(c.name)}, &svc); err == nil &&
		svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
		addrs = append(addrs, addr(svc.Spec.ClusterIP))
	}
	opts := &redis.ClusterOptions{
		Addrs:                    addrs,
		Password:                 c.password(),
		Protocol:                 2,
		DisableIdentity:          true,
		MaxRedirects:             16,
		MinRetryBackoff:          20 * time.Millisecond,
		MaxRetryBackoff:          500 * time.Millisecond,
		DialTimeout:              2 * time.Second,
		ReadTimeout:              5 * time.Second,
		WriteTimeout:             5 * time.Second,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		TLSConfig:                c.tls,
		// go-redis reloads its slot map on MOVED, ASK and READONLY, and
		// otherwise only this often (60 s by default since v9.22, 10 s before); a
		// write to an address nobody holds any more (a pod that came back
		// on a real node with a new one) times out and is retried on the
		// same master, so only this reload ends it. Applications on
		// Kubernetes should set it as short (docs/troubleshooting.md).
		ClusterStateReloadInterval: clientReloadInterval,
	}
	for _, m := range mutate {
		m(opts)
	}
	cl := redis.NewClusterClient(opts)
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// nodeClient is a direct connection to one Redis node, closed when the
// test ends.
func (c *cluster) nodeClient(ip, password string) *redis.Client {
	opts := nodeOptions(ip, password)
	opts.TLSConfig = c.tls
	cl := redis.NewClient(opts)
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

func nodeOptions(ip, password string) *redis.Options {
	return &redis.Options{
		Addr:                     addr(ip),
		Password:                 password,
		Protocol:                 2,
		DisableIdentity:          true,
		DialTimeout:              time.Second,
		ReadTimeout:              2 * time.Second,
		WriteTimeout:             2 * time.Second,
		MaxRetries:               -1,
		PoolSize:                 2,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

func addr(ip string) string { return ip + ":" + strconv.Itoa(resources.RedisPort) }

// nodeLine is one line of CLUSTER NODES.
type nodeLine struct {
	ID, Addr, MasterID string
	Flags              []string
	Slots              int
	// Open lists the importing and migrating markers ([slot-<-id], [slot->-id]).
	Open []string
}

func (n nodeLine) has(flag string) bool { return slices.Contains(n.Flags, flag) }

// IP is the node's announced address without ports.
func (n nodeLine) IP() string {
	host, _, _ := strings.Cut(n.Addr, ":")
	return host
}

// parseNodes parses CLUSTER NODES output (Redis Cluster specification,
// "CLUSTER NODES output format").
func parseNodes(out string) []nodeLine {
	var nodes []nodeLine
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := nodeLine{ID: f[0], Addr: f[1], Flags: strings.Split(f[2], ","), MasterID: f[3]}
		for _, s := range f[8:] {
			switch {
			case strings.HasPrefix(s, "["):
				n.Open = append(n.Open, s)
			case strings.Contains(s, "-"):
				lo, hi, _ := strings.Cut(s, "-")
				a, _ := strconv.Atoi(lo)
				b, _ := strconv.Atoi(hi)
				n.Slots += b - a + 1
			default:
				n.Slots++
			}
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// myself is the node's own line of CLUSTER NODES.
func myself(nodes []nodeLine) (nodeLine, bool) {
	for _, n := range nodes {
		if n.has("myself") {
			return n, true
		}
	}
	return nodeLine{}, false
}

// infoMap parses INFO or CLUSTER INFO output into key → value.
func infoMap(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m
}

// redisCtx bounds one round of Redis commands from the test.
func redisCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// checkConverged checks the cluster as Redis sees it, on every pod: the
// expected pods, and no others, are running and ready; each node answers with cluster_state
// ok, all 16384 slots assigned, every pod known and no open slot; there are
// exactly `shards` masters, each owning slots and followed by
// replicasPerShard replicas of its own shard; and no node ever ran CLUSTER
// RESET, FLUSHALL or FLUSHDB (INFO commandstats since its start). It
// returns node ID by pod name.
func (c *cluster) checkConverged(rc *cachev1beta1.RedisCluster) map[string]string {
	c.t.Helper()
	shards, perShard := int(rc.Spec.Shards), 1+int(rc.Spec.ReplicasPerShard)
	// The pods of a shard removed by a scale-in go with their StatefulSet
	// (garbage collection, then their termination grace period).
	var pods []corev1.Pod
	c.poll("running exactly its pods", 2*time.Minute, func() (bool, string) {
		pods = c.pods()
		return len(pods) == shards*perShard, fmt.Sprintf("%d pods, want %d (%d shards × %d)", len(pods), shards*perShard, shards, perShard)
	})
	pw := c.password()
	ids := map[string]string{}
	podByIP := map[string]string{}
	masters := map[string]string{} // master node ID -> pod
	var firstNodes []nodeLine
	for _, p := range pods {
		if !podIsReady(&p) {
			c.t.Fatalf("pod %s is not ready", p.Name)
		}
		podByIP[p.Status.PodIP] = p.Name
		cl := c.nodeClient(p.Status.PodIP, pw)
		ctx, cancel := redisCtx()
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			cancel()
			c.t.Fatalf("CLUSTER INFO on %s: %v", p.Name, err)
		}
		ci := infoMap(info)
		if ci["cluster_state"] != "ok" || ci["cluster_slots_assigned"] != strconv.Itoa(numSlots) ||
			ci["cluster_slots_ok"] != strconv.Itoa(numSlots) || ci["cluster_known_nodes"] != strconv.Itoa(len(pods)) {
			cancel()
			c.t.Fatalf("CLUSTER INFO on %s: state %s, slots assigned %s ok %s, known nodes %s (want ok, %d, %d, %d)", p.Name,
				ci["cluster_state"], ci["cluster_slots_assigned"], ci["cluster_slots_ok"], ci["cluster_known_nodes"], numSlots, numSlots, len(pods))
		}
		out, err := cl.ClusterNodes(ctx).Result()
		if err != nil {
			cancel()
			c.t.Fatalf("CLUSTER NODES on %s: %v", p.Name, err)
		}
		nodes := parseNodes(out)
		self, ok := myself(nodes)
		if !ok {
			cancel()
			c.t.Fatalf("CLUSTER NODES on %s has no myself line:\n%s", p.Name, out)
		}
		if len(self.Open) > 0 {
			cancel()
			c.t.Fatalf("%s has open slots %v", p.Name, self.Open)
		}
		ids[p.Name] = self.ID
		if self.has("master") {
			masters[self.ID] = p.Name
		}
		if firstNodes == nil {
			firstNodes = nodes
		}
		stats, err := cl.Info(ctx, "commandstats").Result()
		cancel()
		if err != nil {
			c.t.Fatalf("INFO commandstats on %s: %v", p.Name, err)
		}
		for _, forbidden := range []string{"cmdstat_cluster|reset:", "cmdstat_flushall:", "cmdstat_flushdb:"} {
			if strings.Contains(stats, forbidden) {
				c.t.Fatalf("%s ran %s since it started", p.Name, strings.TrimSuffix(strings.TrimPrefix(forbidden, "cmdstat_"), ":"))
			}
		}
	}
	if len(masters) != shards {
		c.t.Fatalf("%d masters (%v), want %d", len(masters), masters, shards)
	}
	// The shape from one node's view: every master owns slots; every
	// replica follows a master of its own shard; each shard has its replicas.
	followers := map[string]int{}
	for _, n := range firstNodes {
		pod := podByIP[n.IP()]
		if pod == "" {
			c.t.Fatalf("CLUSTER NODES lists %s at %s, which is no pod of the cluster", n.ID, n.Addr)
		}
		if n.has("fail") || n.has("fail?") || n.has("handshake") || n.has("noaddr") {
			c.t.Fatalf("CLUSTER NODES lists %s (%s) with flags %v", pod, n.ID, n.Flags)
		}
		switch {
		case n.has("master"):
			if n.Slots == 0 {
				c.t.Fatalf("master %s owns no slots", pod)
			}
		default:
			mpod, ok := masters[n.MasterID]
			if !ok {
				c.t.Fatalf("replica %s follows %s, which is not a master", pod, n.MasterID)
			}
			if shardOf(c.name, pod) != shardOf(c.name, mpod) {
				c.t.Fatalf("replica %s follows %s of another shard", pod, mpod)
			}
			followers[n.MasterID]++
		}
	}
	for id, pod := range masters {
		if followers[id] != int(rc.Spec.ReplicasPerShard) {
			c.t.Fatalf("master %s has %d replicas, want %d", pod, followers[id], rc.Spec.ReplicasPerShard)
		}
	}
	return ids
}

// checkStatusShards checks status.shards: one entry per shard in order,
// the master and replicas as Redis reports them, and slot ranges that
// cover all 16384 slots exactly once.
func (c *cluster) checkStatusShards(rc *cachev1beta1.RedisCluster, ids map[string]string) {
	c.t.Helper()
	if len(rc.Status.Shards) != int(rc.Spec.Shards) {
		c.t.Fatalf("status lists %d shards, want %d: %+v", len(rc.Status.Shards), rc.Spec.Shards, rc.Status.Shards)
	}
	if rc.Status.CurrentShards != rc.Spec.Shards {
		c.t.Fatalf("status.currentShards %d, want %d", rc.Status.CurrentShards, rc.Spec.Shards)
	}
	if rc.Status.ReadyReplicas != rc.Spec.Shards*(1+rc.Spec.ReplicasPerShard) {
		c.t.Fatalf("status.readyReplicas %d, want %d", rc.Status.ReadyReplicas, rc.Spec.Shards*(1+rc.Spec.ReplicasPerShard))
	}
	var covered [numSlots]bool
	for i, sh := range rc.Status.Shards {
		if want := resources.StatefulSetName(c.name, i); sh.Name != want {
			c.t.Fatalf("status.shards[%d].name %q, want %q", i, sh.Name, want)
		}
		if shardOf(c.name, sh.MasterPod) != i || ids[sh.MasterPod] != sh.MasterNodeID {
			c.t.Fatalf("status.shards[%d]: master %s (%s), Redis says node IDs %v", i, sh.MasterPod, sh.MasterNodeID, ids)
		}
		if len(sh.ReplicaPods) != int(rc.Spec.ReplicasPerShard) {
			c.t.Fatalf("status.shards[%d] lists replicas %v, want %d", i, sh.ReplicaPods, rc.Spec.ReplicasPerShard)
		}
		for _, r := range sh.Slots {
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a > b || b >= numSlots {
				c.t.Fatalf("status.shards[%d] has slot range %q", i, r)
			}
			for s := a; s <= b; s++ {
				if covered[s] {
					c.t.Fatalf("slot %d is listed twice in status.shards", s)
				}
				covered[s] = true
			}
		}
	}
	for s, ok := range covered {
		if !ok {
			c.t.Fatalf("slot %d is in no status.shards entry", s)
		}
	}
}

// shardOf is the shard index of a pod name, -1 if it is not the cluster's.
func shardOf(rc, pod string) int {
	shard, _, ok := resources.PodOrdinal(rc, pod)
	if !ok {
		return -1
	}
	return shard
}

// masterOf is the master pod of shard i as status reports it.
func masterOf(rc *cachev1beta1.RedisCluster, shard int) string {
	if shard < len(rc.Status.Shards) {
		return rc.Status.Shards[shard].MasterPod
	}
	return ""
}

// role asks a node for ROLE and returns its first element (master, slave).
func role(ctx context.Context, cl *redis.Client) (string, error) {
	v, err := cl.Do(ctx, "ROLE").Slice()
	if err != nil {
		return "", err
	}
	if len(v) == 0 {
		return "", errors.New("empty ROLE reply")
	}
	s, _ := v[0].(string)
	return s, nil
}

// events lists the Kubernetes events recorded on the RedisCluster.
func (c *cluster) events() []corev1.Event {
	c.t.Helper()
	var list corev1.EventList
	if err := env.k8s.List(context.Background(), &list, client.InNamespace(c.ns)); err != nil {
		c.t.Fatalf("listing events: %v", err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "RedisCluster" && e.InvolvedObject.Name == c.name {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(out[i]).Before(eventTime(out[j])) })
	return out
}

func eventTime(e corev1.Event) time.Time {
	if !e.FirstTimestamp.IsZero() {
		return e.FirstTimestamp.Time
	}
	return e.EventTime.Time
}

func eventCount(e corev1.Event) int {
	if e.Count > 0 {
		return int(e.Count)
	}
	return 1
}

// statefulSets lists the cluster's StatefulSets by name.
func (c *cluster) statefulSets() map[string]appsv1.StatefulSet {
	c.t.Helper()
	var list appsv1.StatefulSetList
	if err := env.k8s.List(context.Background(), &list, client.InNamespace(c.ns),
		client.MatchingLabels{resources.LabelCluster: c.name}); err != nil {
		c.t.Fatalf("listing StatefulSets: %v", err)
	}
	out := map[string]appsv1.StatefulSet{}
	for _, s := range list.Items {
		out[s.Name] = s
	}
	return out
}

// claims lists the cluster's PVCs.
func (c *cluster) claims() []corev1.PersistentVolumeClaim {
	c.t.Helper()
	var list corev1.PersistentVolumeClaimList
	if err := env.k8s.List(context.Background(), &list, client.InNamespace(c.ns),
		client.MatchingLabels{resources.LabelCluster: c.name}); err != nil {
		c.t.Fatalf("listing claims: %v", err)
	}
	return list.Items
}

// dumpDebug logs the RedisCluster, its pods, its events and the tail of
// the operator's log.
func (c *cluster) dumpDebug() {
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{}
	if err := env.k8s.Get(ctx, c.key(), rc); err == nil {
		b, _ := objectYAML(rc)
		c.t.Logf("RedisCluster %s:\n%s", c.key(), b)
	}
	var pods corev1.PodList
	if err := env.k8s.List(ctx, &pods, client.InNamespace(c.ns)); err == nil {
		for _, p := range pods.Items {
			c.t.Logf("pod %s ip %s phase %s ready %v deleting %v", p.Name, p.Status.PodIP, p.Status.Phase, podIsReady(&p), p.DeletionTimestamp != nil)
		}
		c.logPodTails(pods.Items, 40)
	}
	var evs corev1.EventList
	if err := env.k8s.List(ctx, &evs, client.InNamespace(c.ns)); err == nil {
		for _, e := range evs.Items {
			if e.InvolvedObject.Kind != "RedisCluster" && e.InvolvedObject.Kind != "Pod" {
				continue
			}
			c.t.Logf("event %s %s/%s %s ×%d: %s", eventTime(e).Format("15:04:05"), e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, eventCount(e), e.Message)
		}
	}
	env.printOperatorLog(os.Stderr, 80)
}

// logPodTails logs the last n lines of each pod's redis container (the
// start script's handover lines and redis-server's own), read through the
// kubelet API as kubectl logs does: the plane removes a pod's files when
// the namespace goes.
func (c *cluster) logPodTails(pods []corev1.Pod, n int64) {
	cs, err := kubernetes.NewForConfig(env.cfg)
	if err != nil {
		c.t.Logf("pod logs: %v", err)
		return
	}
	for _, p := range pods {
		b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
			Container: resources.RedisContainerName, TailLines: &n}).DoRaw(context.Background())
		if err != nil {
			c.t.Logf("pod %s log: %v", p.Name, err)
			continue
		}
		c.t.Logf("--- last %d lines of pod %s (%s):\n%s", n, p.Name, resources.RedisContainerName, b)
	}
}

// destroy deletes the RedisCluster and waits until it is gone (its
// finalizer removed), then deletes claims left behind, so the next
// scenario starts on a quiet machine.
func (c *cluster) destroy() {
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{}
	rc.Namespace, rc.Name = c.ns, c.name
	if err := env.k8s.Delete(ctx, rc); err != nil && !apierrors.IsNotFound(err) {
		c.t.Errorf("deleting RedisCluster %s: %v", c.key(), err)
		return
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := env.k8s.Get(ctx, c.key(), rc)
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			c.t.Errorf("RedisCluster %s still exists 3 minutes after its deletion", c.key())
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	_ = env.k8s.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(c.ns),
		client.MatchingLabels{resources.LabelCluster: c.name})
	// Pods stop in the background (garbage collection of the StatefulSets).
	_ = env.k8s.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(c.ns), client.MatchingLabels{resources.LabelCluster: c.name})
}

// waitPodsGone polls until no pod of the cluster is left.
func (c *cluster) waitPodsGone(timeout time.Duration) {
	c.t.Helper()
	c.poll("without pods", timeout, func() (bool, string) {
		n := len(c.pods())
		return n == 0, fmt.Sprintf("%d pods left", n)
	})
}

// objectYAML renders an object as `kubectl get -o yaml` does, without
// managedFields.
func objectYAML(rc *cachev1beta1.RedisCluster) ([]byte, error) {
	o := rc.DeepCopy()
	o.APIVersion, o.Kind = cachev1beta1.GroupVersion.String(), "RedisCluster"
	o.ManagedFields = nil
	return yaml.Marshal(o)
}

// statusObserver polls the RedisCluster every 200 ms for the life of the
// scenario. It keeps the timeline of phases and conditions (scenarios
// assert on what was reported meanwhile) and, with E2E_FIXTURE_DIR set,
// writes the object the first time each interesting moment is seen.
type statusObserver struct {
	c    *cluster
	mu   sync.Mutex
	seen []observed
	done chan struct{}
	quit chan struct{}
}

// observed is one poll's result.
type observed struct {
	at         time.Time
	phase      cachev1beta1.Phase
	health     cachev1beta1.HealthCode // "" when status.health is unset
	conditions map[string]metav1.Condition
}

func (o observed) cond(t string) metav1.ConditionStatus {
	if c, ok := o.conditions[t]; ok {
		return c.Status
	}
	return ""
}

func startObserver(c *cluster) *statusObserver {
	o := &statusObserver{c: c, done: make(chan struct{}), quit: make(chan struct{})}
	go o.run()
	return o
}

func (o *statusObserver) run() {
	defer close(o.done)
	written := map[string]bool{}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-o.quit:
			return
		case <-tick.C:
		}
		rc := &cachev1beta1.RedisCluster{}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := env.k8s.Get(ctx, o.c.key(), rc)
		cancel()
		if err != nil {
			continue
		}
		ob := observed{at: time.Now(), phase: rc.Status.Phase, conditions: map[string]metav1.Condition{}}
		if rc.Status.Health != nil {
			ob.health = rc.Status.Health.Status
		}
		for _, cond := range rc.Status.Conditions {
			ob.conditions[cond.Type] = cond
		}
		o.mu.Lock()
		o.seen = append(o.seen, ob)
		o.mu.Unlock()
		if env.fixtureDir == "" {
			continue
		}
		moment := strings.ToLower(string(rc.Status.Phase))
		if rc.Spec.Paused && ob.cond(cachev1beta1.RedisClusterPausedCondition) == metav1.ConditionTrue {
			moment = "paused"
		}
		switch moment {
		case "bootstrapping", "ready", "scaling", "upgrading", "degraded", "paused":
		default:
			continue
		}
		if written[moment] {
			continue
		}
		written[moment] = true
		if b, err := objectYAML(rc); err == nil {
			_ = os.WriteFile(filepath.Join(env.fixtureDir, o.c.name+"-"+moment+".yaml"), b, 0o644)
		}
	}
}

func (o *statusObserver) stop() {
	select {
	case <-o.quit:
	default:
		close(o.quit)
	}
	<-o.done
}

// since returns what was observed from t on.
func (o *statusObserver) since(t time.Time) []observed {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []observed
	for _, ob := range o.seen {
		if !ob.at.Before(t) {
			out = append(out, ob)
		}
	}
	return out
}

// phasesSince lists the phases (with the Progressing reason) observed from
// t on, each once per run of equal values, for failure messages.
func (o *statusObserver) phasesSince(t time.Time) string {
	var out []string
	for _, ob := range o.since(t) {
		p := string(ob.phase)
		if c, ok := ob.conditions[cachev1beta1.RedisClusterProgressingCondition]; ok {
			p += "/" + c.Reason
		}
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	return strings.Join(out, " → ")
}
