package statusview

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// now is the fixed clock the golden outputs count ages from.
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// The recorded CLUSTER NODES outputs of redis-server 7.0.15 that the
// topology engine's tests use (controllers/topology/testdata/README.md):
// pod demo-shard-S-O is the node at 127.0.0.(2+S) for O=0 and at
// 127.0.0.(6+S), rotated, for O=1, as in that capture.
const topologyTestdata = "../../../controllers/topology/testdata/"

var nodeIDs = map[string]string{
	"demo-shard-0-0": "674621af07b2b4da279dafcee969efb87cb26e0f",
	"demo-shard-0-1": "57f0178f9883b5f5abd05871128ca7d1c1445675",
	"demo-shard-1-0": "7506852052dcaab8c273a68ffbb71cc06c61e9f9",
	"demo-shard-1-1": "928eb96a408a4fa38cf7684cfb4dd1b807ceb851",
	"demo-shard-2-0": "6c4100c6760f71366dcfecccb1863248a3132dc5",
	"demo-shard-2-1": "5ee39e606c26e07ae80576974dea71b5ae9a3bc7",
}

func readFixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(topologyTestdata + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// seenBy moves the myself flag of a CLUSTER NODES reply to node id.
func seenBy(text, id string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		l = strings.Replace(l, "myself,", "", 1)
		if strings.HasPrefix(l, id+" ") {
			f := strings.Fields(l)
			f[2] = "myself," + f[2]
			l = strings.Join(f, " ")
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n") + "\n"
}

// info is an INFO replication keyspace server memory reply.
func info(role string, offset, keys, used, maxmem int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Server\r\nredis_version:7.0.15\r\nrun_id:%040d\r\n\r\n# Replication\r\nrole:%s\r\n", offset, role)
	if role == "slave" {
		fmt.Fprintf(&b, "master_host:10.244.0.9\r\nmaster_port:6379\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\nslave_repl_offset:%d\r\n", offset)
	} else {
		fmt.Fprintf(&b, "connected_slaves:1\r\nmaster_repl_offset:%d\r\n", offset)
	}
	fmt.Fprintf(&b, "\r\n# Memory\r\nused_memory:%d\r\nmaxmemory:%d\r\n\r\n# Keyspace\r\n", used, maxmem)
	if keys > 0 {
		fmt.Fprintf(&b, "db0:keys=%d,expires=0,avg_ttl=0\r\n", keys)
	}
	return b.String()
}

func pod(name string, shard, ordinal int, ready bool) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{
			resources.LabelCluster: "demo", resources.LabelShard: fmt.Sprint(shard)}},
		Spec:   corev1.PodSpec{NodeName: "local-node"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.244.0.%d", 10+shard*2+ordinal)},
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

func cluster() *cachev1beta1.RedisCluster {
	at := metav1.NewTime(now.Add(-3 * time.Hour))
	return &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "demo", Generation: 2},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1, Image: "redis:7.0.15"},
		Status: cachev1beta1.RedisClusterStatus{
			ObservedGeneration: 2, Phase: cachev1beta1.PhaseReady,
			Health:      &cachev1beta1.HealthStatus{Status: cachev1beta1.HealthHealthy},
			Credentials: &cachev1beta1.CredentialsStatus{Source: "generated (Secret demo-auth)"},
			Conditions: []metav1.Condition{
				{Type: "Ready", Status: "True", Reason: "Ready", Message: "3 shards, all 16384 slots served", LastTransitionTime: at},
				{Type: "Degraded", Status: "False", Reason: "AsExpected", Message: "", LastTransitionTime: at},
			},
		},
	}
}

func event(ago time.Duration, typ, reason, msg string, count int32) corev1.Event {
	return corev1.Event{Type: typ, Reason: reason, Message: msg, Count: count, LastTimestamp: metav1.NewTime(now.Add(-ago))}
}

func healthyInput(t *testing.T) Input {
	nodes := readFixture(t, "healthy-3x1.cluster-nodes.txt")
	ci := readFixture(t, "healthy-3x1.cluster-info.txt")
	in := Input{Cluster: cluster(), Samples: map[string]Sample{}, MaxEvents: 3, Events: []corev1.Event{
		event(3*time.Hour, "Normal", "Bootstrapping", "Forming the cluster", 1),
		event(2*time.Hour, "Normal", "Ready", "3 shards, all 16384 slots served", 1),
		event(90*time.Second, "Normal", "ReplicaAttached", "demo-shard-2-1 replicates demo-shard-2-0", 2),
		event(3*time.Hour+time.Minute, "Normal", "Created", "older than the three kept", 1),
	}}
	keys := []int64{100, 120, 80}
	for s := range 3 {
		for o := range 2 {
			name := resources.PodName("demo", s, o)
			in.Pods = append(in.Pods, pod(name, s, o, true))
			role, off := "master", int64(50000+s)
			if o == 1 {
				role, off = "slave", int64(50000+s-s*700)
			}
			in.Samples[name] = Sample{ClusterNodes: seenBy(nodes, nodeIDs[name]), ClusterInfo: ci,
				Info: info(role, off, keys[s], 1572864+int64(s)*4096, 104857600)}
		}
	}
	return in
}

// degradedInput is a cluster in the middle of a slot move (slot 5461 from
// shard 1 to shard 0), with shard 2 leaving, one replica Pending (not
// asked), one that refused the password and no maxmemory.
func degradedInput(t *testing.T) Input {
	in := healthyInput(t)
	in.Cluster.Status.Phase = cachev1beta1.PhaseScaling
	in.Cluster.Status.LeavingShards = []string{"demo-shard-2"}
	in.Cluster.Status.Migration = &cachev1beta1.MigrationStatus{SlotsMoved: 10, SlotsTotal: 5461, KeysMoved: 42}
	in.Cluster.Status.Conditions[0] = metav1.Condition{Type: "Ready", Status: "False", Reason: "Scaling",
		Message: "moving slots off demo-shard-2: " + strings.Repeat("a long message that the table cuts ", 5), LastTransitionTime: metav1.NewTime(now.Add(-30 * time.Second))}
	in.Samples["demo-shard-0-0"] = Sample{ClusterNodes: seenBy(readFixture(t, "open-slot.importing-side.cluster-nodes.txt"), nodeIDs["demo-shard-0-0"]),
		ClusterInfo: in.Samples["demo-shard-0-0"].ClusterInfo, Info: info("master", 50000, 101, 2<<20, 0)}
	in.Samples["demo-shard-1-0"] = Sample{ClusterNodes: readFixture(t, "open-slot.migrating-side.cluster-nodes.txt"),
		ClusterInfo: in.Samples["demo-shard-1-0"].ClusterInfo, Info: info("master", 50001, 119, 2<<20, 0)}
	delete(in.Samples, "demo-shard-2-1")
	in.Pods[5].Status.Phase = corev1.PodPending
	in.Pods[5].Status.PodIP = ""
	in.Pods[5].Status.Conditions[0].Status = corev1.ConditionFalse
	in.Samples["demo-shard-1-1"] = Sample{Err: errors.New("redis-cli: NOAUTH Authentication required.")}
	return in
}

func TestRenderGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   func(*testing.T) Input
	}{
		{"healthy", healthyInput},
		{"degraded", degradedInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Build(tc.in(t))
			var text, js bytes.Buffer
			if err := RenderText(&text, r, now); err != nil {
				t.Fatal(err)
			}
			if err := RenderJSON(&js, r); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".txt", text.Bytes())
			golden(t, tc.name+".json", js.Bytes())
			var back Report
			if err := json.Unmarshal(js.Bytes(), &back); err != nil {
				t.Fatalf("the JSON does not parse back: %v", err)
			}
		})
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs (run with -update after checking):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
