//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// keyset is n keys <prefix>:<i> loaded in bulk before a disruption, each
// with a value naming the run.
type keyset struct {
	prefix, token string
	n             int
}

func (k *keyset) key(i int) string   { return fmt.Sprintf("%s:%d", k.prefix, i) }
func (k *keyset) value(i int) string { return fmt.Sprintf("%s-%d-%s", k.prefix, i, k.token) }

// loadKeys writes n keys through c in pipelines of 1000 (go-redis splits a
// cluster pipeline by master) and fails t unless every SET succeeded.
func loadKeys(t testing.TB, c *redis.ClusterClient, prefix string, n int) *keyset {
	t.Helper()
	k := &keyset{prefix: prefix, token: randomToken(), n: n}
	for from := 0; from < n; from += 1000 {
		var err error
		for try := 0; try < 5; try++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for i := from; i < min(from+1000, n); i++ {
					p.Set(ctx, k.key(i), k.value(i), 0)
				}
				return nil
			})
			cancel()
			if err == nil {
				break
			}
			c.ReloadState(context.Background())
			time.Sleep(time.Second)
		}
		if err != nil {
			t.Fatalf("loading keys %s:%d..: %v", prefix, from, err)
		}
	}
	t.Logf("loaded %d keys %s:*", n, prefix)
	return k
}

// check reads the keys idx (all of them when idx is nil) back through c
// and returns how many are missing and how many hold another value.
func (k *keyset) check(t testing.TB, c *redis.ClusterClient, idx []int) (lost, wrong []string) {
	t.Helper()
	if idx == nil {
		idx = make([]int, k.n)
		for i := range idx {
			idx[i] = i
		}
	}
	return readKeys(t, c, len(idx), func(j int) (string, string) { return k.key(idx[j]), k.value(idx[j]) })
}

// keySlots asks the node at ip for CLUSTER KEYSLOT of each key (Redis's
// own hash, hash tags included), pipelined.
func keySlots(t testing.TB, c *cluster, ip string, keys []string) []int {
	t.Helper()
	cl := c.nodeClient(ip, c.password())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmds := make([]*redis.IntCmd, len(keys))
	if _, err := cl.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, key := range keys {
			cmds[i] = p.ClusterKeySlot(ctx, key)
		}
		return nil
	}); err != nil {
		t.Fatalf("CLUSTER KEYSLOT: %v", err)
	}
	out := make([]int, len(keys))
	for i, cmd := range cmds {
		out[i] = int(cmd.Val())
	}
	return out
}

// slotSet parses status-style slot ranges ("0-5460", "7") into a set.
func slotSet(t testing.TB, ranges []string) topology.SlotSet {
	t.Helper()
	var rs []topology.SlotRange
	for _, s := range ranges {
		r, err := topology.ParseSlotRange(s)
		if err != nil {
			t.Fatalf("slot range %q: %v", s, err)
		}
		rs = append(rs, r)
	}
	return topology.SlotSetOf(rs...)
}

// restartCount is the sum of the restart counts of the pod's containers.
func restartCount(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// claimUIDs maps the cluster's claims, by name, to their UIDs.
func (c *cluster) claimUIDs() map[string]types.UID {
	out := map[string]types.UID{}
	for _, pvc := range c.claims() {
		out[pvc.Name] = pvc.UID
	}
	return out
}

// compareClaims lists, in words, the claims of before missing from after or
// re-created with another UID.
func compareClaims(before, after map[string]types.UID) []string {
	var out []string
	for name, uid := range before {
		switch now, ok := after[name]; {
		case !ok:
			out = append(out, name+" deleted")
		case now != uid:
			out = append(out, name+" re-created")
		}
	}
	sort.Strings(out)
	return out
}

// scaleShards sets spec.replicas of every shard's StatefulSet to n, as
// `kubectl scale sts --replicas=n` does, retrying on conflict.
func (c *cluster) scaleShards(shards, n int32) {
	c.t.Helper()
	for i := 0; i < int(shards); i++ {
		name := resources.StatefulSetName(c.name, i)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			sts := &appsv1.StatefulSet{}
			if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: name}, sts); err != nil {
				return err
			}
			sts.Spec.Replicas = &n
			return env.k8s.Update(context.Background(), sts)
		})
		if err != nil {
			c.t.Fatalf("scaling StatefulSet %s to %d: %v", name, n, err)
		}
	}
	c.t.Logf("scaled %d StatefulSets to %d by hand", shards, n)
}

// shardReplicas is spec.replicas of each shard's StatefulSet, for messages
// and checks (-1 when it does not exist).
func (c *cluster) shardReplicas(shards int32) []int32 {
	c.t.Helper()
	all := c.statefulSets()
	out := make([]int32, shards)
	for i := range out {
		sts, ok := all[resources.StatefulSetName(c.name, i)]
		switch {
		case !ok:
			out[i] = -1
		case sts.Spec.Replicas == nil:
			out[i] = 1
		default:
			out[i] = *sts.Spec.Replicas
		}
	}
	return out
}

// eventTotals sums the counts of the cluster's events by reason (the
// recorder folds repeats into one Event with a count).
func (c *cluster) eventTotals() map[string]int {
	out := map[string]int{}
	for _, e := range c.events() {
		out[e.Reason] += eventCount(e)
	}
	return out
}

// eventDelta is after minus before, by reason, leaving out zeros.
func eventDelta(before, after map[string]int) (map[string]int, int) {
	d, total := map[string]int{}, 0
	for reason, n := range after {
		if n > before[reason] {
			d[reason] = n - before[reason]
			total += n - before[reason]
		}
	}
	return d, total
}

// opLogOffset is the operator log's current length: operatorLog(offset)
// reads what was written after it.
func opLogOffset(t testing.TB) int64 {
	t.Helper()
	env.opLogs.flush()
	fi, err := os.Stat(env.opLog)
	if err != nil {
		t.Fatalf("operator log: %v", err)
	}
	return fi.Size()
}

// operatorLog returns the lines of the operator log written after offset
// that mention namespace ns and contain every one of words.
func operatorLog(t testing.TB, offset int64, ns string, words ...string) []string {
	t.Helper()
	env.opLogs.flush()
	f, err := os.Open(env.opLog)
	if err != nil {
		t.Fatalf("operator log: %v", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatalf("operator log: %v", err)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	quoted := strconv.Quote(ns)
lines:
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, quoted) {
			continue
		}
		for _, w := range words {
			if !strings.Contains(line, w) {
				continue lines
			}
		}
		out = append(out, line)
	}
	return out
}

// eventually is a poll that does not fail t: it calls cond every 500 ms
// until it reports true or timeout passes, and returns the last result.
func (c *cluster) eventually(timeout time.Duration, cond func() (bool, string)) (bool, string) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok || time.Now().After(deadline) {
			return ok, msg
		}
		checkOperator(c.t)
		time.Sleep(500 * time.Millisecond)
	}
}

// waitSettled polls until settled holds and returns the RedisCluster.
func (c *cluster) waitSettled(timeout time.Duration) *cachev1beta1.RedisCluster {
	c.t.Helper()
	c.poll("Ready with Redis agreeing", timeout, c.settled)
	return c.get()
}

// settled reports whether the RedisCluster is Ready and Redis agrees on
// every pod as it runs now: each answers cluster_state ok with all 16384
// slots served, knows every pod and holds none as failing or in
// handshake, and the pods status.shards names as masters are the masters
// in Redis. A status written before the operator was stopped, before a
// partition ended, or during a pass that waited out a lost node's dial
// timeout, can still say Ready while Redis does not agree.
func (c *cluster) settled() (bool, string) {
	c.t.Helper()
	rc := c.get()
	if !isReady(rc) {
		return false, statusSummary(rc)
	}
	statusMasters := map[string]bool{}
	for _, sh := range rc.Status.Shards {
		statusMasters[sh.MasterPod] = true
	}
	pw := c.password()
	pods := c.pods()
	for _, p := range pods {
		if !podIsReady(&p) {
			return false, p.Name + " is not ready"
		}
		cl := redis.NewClient(nodeOptions(p.Status.PodIP, pw))
		ctx, cancel := redisCtx()
		info, err := cl.ClusterInfo(ctx).Result()
		nodes, nerr := cl.ClusterNodes(ctx).Result()
		cancel()
		_ = cl.Close()
		ci := infoMap(info)
		if err != nil || nerr != nil || ci["cluster_state"] != "ok" || ci["cluster_slots_ok"] != strconv.Itoa(numSlots) ||
			ci["cluster_known_nodes"] != strconv.Itoa(len(pods)) {
			return false, fmt.Sprintf("%s: state %s, slots ok %s, known nodes %s (%v, %v)", p.Name,
				ci["cluster_state"], ci["cluster_slots_ok"], ci["cluster_known_nodes"], err, nerr)
		}
		for _, n := range parseNodes(nodes) {
			if n.has("fail") || n.has("fail?") || n.has("handshake") || n.has("noaddr") {
				return false, fmt.Sprintf("%s sees %s (%s) with flags %v", p.Name, n.ID, n.Addr, n.Flags)
			}
		}
		// The status names the masters Redis has: a status written before a
		// failover, still saying Ready, is not settled.
		if me, ok := myself(parseNodes(nodes)); ok && me.has("master") != statusMasters[p.Name] {
			return false, fmt.Sprintf("%s is %v in Redis, status.shards masters %v", p.Name, me.Flags, statusMasters)
		}
	}
	return true, ""
}

// reportKeys prints the scenario's counts on the suite's output, next to
// its `e2e:` result line.
func reportKeys(name string, loaded, loadedLost int, r writerResult, ackedLost int) {
	fmt.Printf("e2e: %s keys: loaded %d, lost %d; writer: %d writes, %d acknowledged, %d acknowledged lost\n",
		name, loaded, loadedLost, r.Attempts, len(r.Acked), ackedLost)
}

// firewall holds iptables rules a scenario added; remove deletes them all
// (idempotent), and the scenario registers it with t.Cleanup before adding
// any, so no rule outlives the scenario.
type firewall struct {
	t     testing.TB
	rules [][]string // chain, then the rule's match and target
}

// add inserts rule (iptables -I chain ...), failing t on error.
func (f *firewall) add(chain string, rule ...string) {
	f.t.Helper()
	args := append([]string{"-w", "-I", chain}, rule...)
	if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
		f.t.Fatalf("iptables %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	f.rules = append(f.rules, append([]string{chain}, rule...))
	f.t.Logf("iptables %s", strings.Join(args[1:], " "))
}

// remove deletes every rule added (iptables -D), reporting failures.
func (f *firewall) remove() {
	for _, r := range f.rules {
		args := append([]string{"-w", "-D"}, r...)
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
			f.t.Errorf("iptables %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	f.rules = nil
}
