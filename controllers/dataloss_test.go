package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/status"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// The engine is told the cluster was formed from status, never from the
// nodes: formedTime, or (a cluster formed before formedTime existed)
// status.shards owning every slot. Field case R5: every node came back empty
// and the cluster was rebuilt as new.
func TestDesiredFormedFromStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status cachev1beta1.RedisClusterStatus
		formed bool
	}{
		{name: "new cluster"},
		{name: "formedTime", status: cachev1beta1.RedisClusterStatus{FormedTime: &metav1.Time{Time: time.Now()}}, formed: true},
		{name: "formed before formedTime existed: status.shards own every slot", formed: true,
			status: cachev1beta1.RedisClusterStatus{Shards: lostShardStatus().Shards}},
		{name: "in the middle of a bootstrap: masters chosen, some slots assigned",
			status: cachev1beta1.RedisClusterStatus{Shards: lostShardStatus().Shards[:2]}},
		{name: "shards without master yet",
			status: cachev1beta1.RedisClusterStatus{Shards: []cachev1beta1.ShardStatus{{Name: "c-shard-0"}}}},
	} {
		rc := &cachev1beta1.RedisCluster{Spec: cachev1beta1.RedisClusterSpec{Shards: 3}, Status: tc.status}
		if got := newScope(rc, time.Now(), logr.Discard()).desired().Formed; got != tc.formed {
			t.Errorf("%s: Desired.Formed = %v, want %v", tc.name, got, tc.formed)
		}
	}
}

// lostShardStatus is a status that recorded shard c-shard-2 holding
// 10923-16383 with master ids("c").
func lostShardStatus() cachev1beta1.RedisClusterStatus {
	return cachev1beta1.RedisClusterStatus{
		FormedTime: &metav1.Time{Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		Shards: []cachev1beta1.ShardStatus{
			{Name: "c-shard-0", MasterPod: "c-shard-0-0", MasterNodeID: ids("a"), Slots: []string{"0-5460"}},
			{Name: "c-shard-1", MasterPod: "c-shard-1-0", MasterNodeID: ids("b"), Slots: []string{"5461-10922"}},
			{Name: "c-shard-2", MasterPod: "c-shard-2-0", MasterNodeID: ids("c"), Slots: []string{"10923-16383"}},
		},
	}
}

// Field case R20 (both pods and claims of one shard deleted): passes where
// the engine ran and reported the loss alternate with passes where it
// could not run (the shard's new pods starting). The status keeps one
// stable verdict naming the shard and the slots, there is one event per
// transition, and the lost shard's last known slots stay in status.
func TestShardLostIsOneStableVerdict(t *testing.T) {
	ctx := context.Background()
	scheme := testScheme(t)
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}, Status: lostShardStatus()}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rc).WithStatusSubresource(rc).Build()
	rec := record.NewFakeRecorder(100)
	r := &RedisClusterReconciler{Client: cl, Recorder: rec}
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)

	lostShards := func() []cachev1beta1.ShardStatus {
		return []cachev1beta1.ShardStatus{
			{Name: "c-shard-0", MasterPod: "c-shard-0-0", MasterNodeID: ids("a"), ReplicaPods: []string{"c-shard-0-1"}, Slots: []string{"0-5460"}},
			{Name: "c-shard-1", MasterPod: "c-shard-1-0", MasterNodeID: ids("b"), ReplicaPods: []string{"c-shard-1-1"}, Slots: []string{"5461-10922"}},
			{Name: "c-shard-2"},
		}
	}
	engineLost := func(o *status.Observation) {
		// Every node reachable, the new nodes of shard 2 empty: the engine
		// reports the loss; it does not know the dead owner's shard.
		o.Topology = &status.Topology{EngineRan: true, SlotsAssigned: 10923, StateOK: false, CurrentShards: 2,
			Unassigned: []topology.SlotRange{{Start: 10923, End: 16383}}, SlotsToMove: true, Shards: lostShards(),
			DataLoss: &topology.LostShard{NodeIDs: []string{ids("c")}, Slots: []topology.SlotRange{{Start: 10923, End: 16383}}, SlotCount: 5461}}
	}
	podsStarting := func(o *status.Observation) {
		o.Pods = status.Pods{Expected: 6, Ready: 4, NotReady: []string{"c-shard-2-0", "c-shard-2-1"}}
		o.Topology = &status.Topology{Planned: true, SlotsAssigned: 10923, StateOK: false, CurrentShards: 2,
			Unassigned: []topology.SlotRange{{Start: 10923, End: 16383}}, Shards: lostShards()}
	}
	var messages []string
	for i, pass := range []func(*status.Observation){engineLost, podsStarting, engineLost, podsStarting, engineLost} {
		live := &cachev1beta1.RedisCluster{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), live); err != nil {
			t.Fatal(err)
		}
		s := newScope(live, now.Add(time.Duration(i)*time.Minute), logr.Discard())
		s.obs.Creds = status.Credentials{NoAuth: true, Live: true}
		s.obs.PodsObserved = true
		s.obs.Pods = status.Pods{Expected: 6, Ready: 6}
		pass(&s.obs)
		if err := r.writeStatus(ctx, s, nil, true); err != nil {
			t.Fatal(err)
		}
		st := s.rc.Status
		d := meta.FindStatusCondition(st.Conditions, cachev1beta1.RedisClusterDegradedCondition)
		p := meta.FindStatusCondition(st.Conditions, cachev1beta1.RedisClusterProgressingCondition)
		sl := meta.FindStatusCondition(st.Conditions, cachev1beta1.RedisClusterSlotsAssignedCondition)
		if d.Status != metav1.ConditionTrue || d.Reason != cachev1beta1.RedisClusterShardLostReason ||
			p.Status != metav1.ConditionFalse || p.Reason != cachev1beta1.RedisClusterShardLostReason || st.Phase != cachev1beta1.PhaseDegraded {
			t.Fatalf("pass %d: Degraded %s/%s, Progressing %s/%s, phase %s; want ShardLost throughout", i, d.Status, d.Reason, p.Status, p.Reason, st.Phase)
		}
		if !strings.Contains(sl.Message, "10923-16383") {
			t.Errorf("pass %d: SlotsAssigned does not name the lost range: %q", i, sl.Message)
		}
		if sh := st.Shards[2]; sh.MasterNodeID != ids("c") || len(sh.Slots) != 1 || sh.Slots[0] != "10923-16383" || sh.MasterPod != "" {
			t.Errorf("pass %d: the lost shard's last known master is gone from status: %+v", i, sh)
		}
		messages = append(messages, d.Message)
	}
	for _, want := range []string{"5461 slots", "10923-16383", "c-shard-2", "lostShardPolicy to Reassign"} {
		if !strings.Contains(messages[0], want) {
			t.Errorf("Degraded message %q lacks %q", messages[0], want)
		}
	}
	for i, m := range messages {
		if m != messages[0] {
			t.Errorf("pass %d: Degraded message changed:\n%s\n%s", i, messages[0], m)
		}
	}
	events := drain(rec)
	lost := 0
	for _, e := range events {
		if strings.Contains(e, " ShardLost ") {
			lost++
		}
	}
	if lost != 1 || len(events) > 2 {
		t.Errorf("events over 5 passes of one unchanged loss: %q; want one ShardLost warning (and at most one more)", events)
	}
}

// While a shard is lost the controller looks again less and less often,
// not every busyRequeue.
func TestLostShardBacksOff(t *testing.T) {
	r := &RedisClusterReconciler{ResyncPeriod: time.Minute}
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rc := &cachev1beta1.RedisCluster{Status: lostShardStatus()}
	rc.Status.Conditions = []metav1.Condition{{Type: cachev1beta1.RedisClusterDegradedCondition, Status: metav1.ConditionTrue,
		Reason: cachev1beta1.RedisClusterShardLostReason, Message: "lost", LastTransitionTime: metav1.NewTime(since)}}
	var last time.Duration
	for _, age := range []time.Duration{0, 5 * time.Second, 20 * time.Second, 40 * time.Second, time.Hour} {
		s := newScope(rc.DeepCopy(), since.Add(age), logr.Discard())
		got := r.stuckRequeue(s, cachev1beta1.RedisClusterShardLostReason)
		if got < busyRequeue || got > time.Minute || got < last {
			t.Errorf("after %s: requeue %s (before %s)", age, got, last)
		}
		last = got
		s.obs.PodsObserved = true
		s.obs.Topology = &status.Topology{SlotsAssigned: 10923}
		if s.busy() {
			t.Errorf("after %s: a lost shard counts as busy (requeue every %s)", age, busyRequeue)
		}
	}
	if last != time.Minute {
		t.Errorf("a loss an hour old is looked at every %s, want the resync period", last)
	}
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := cachev1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// healthyObservation is a converged 3-shard cluster (as in package
// status's tests).
func healthyObservation() status.Observation {
	return status.Observation{
		DesiredShards:    3,
		ReplicasPerShard: 1,
		Creds:            status.Credentials{NoAuth: true, Live: true},
		PodsObserved:     true,
		Pods:             status.Pods{Expected: 6, Ready: 6},
		Topology: &status.Topology{
			EngineRan: true, Converged: true, SlotsAssigned: topology.NumSlots, StateOK: true, KnownNodes: 6, CurrentShards: 3,
			Shards: []cachev1beta1.ShardStatus{{Name: "c-shard-0", MasterPod: "c-shard-0-1", ReplicaPods: []string{"c-shard-0-0"}, Slots: []string{"0-5460"}}},
		},
	}
}
