package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// faultView is a formed 3×1 cluster as the engine observes it: masters
// c-shard-N-0 owning the even split, replicas c-shard-N-1.
func faultView() (*topology.ClusterView, topology.Desired) {
	slots := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	view := &topology.ClusterView{ObservedAt: time.Now()}
	desired := topology.Desired{ReplicasPerShard: 1, Formed: true}
	for i, r := range slots {
		shard := topology.ShardSpec{Name: "c-shard-" + string(rune('0'+i))}
		masterID := ids(string(rune('a' + i)))
		for j := 0; j < 2; j++ {
			ep := topology.Endpoint{Name: shard.Name + "-" + string(rune('0'+j)), Addr: "127.0.0.1:6379"}
			shard.Nodes = append(shard.Nodes, ep)
			self := topology.NodeRecord{ID: masterID}
			self.Flags.Myself = true
			if j == 0 {
				self.Flags.Master = true
				self.Slots = []topology.SlotRange{{Start: r[0], End: r[1]}}
			} else {
				self.ID, self.MasterID = ids(string(rune('a'+i))+"1"), masterID
				self.Flags.Replica = true
			}
			n := &topology.NodeView{Endpoint: ep, ID: self.ID, Known: []topology.NodeRecord{self}}
			n.Info.State, n.Info.KnownNodes = "ok", 6
			view.Nodes = append(view.Nodes, n)
		}
		desired.Shards = append(desired.Shards, shard)
	}
	return view, desired
}

// storedPass starts a pass of r on the RedisCluster stored under key, at
// time at, with every pod ready (the Topology is the caller's).
func storedPass(t *testing.T, r *RedisClusterReconciler, key client.ObjectKey, at time.Time, desired topology.Desired) (*scope, *progressReporter) {
	t.Helper()
	live := &cachev1beta1.RedisCluster{}
	if err := r.Client.Get(context.Background(), key, live); err != nil {
		t.Fatal(err)
	}
	s := newScope(live, at, logr.Discard())
	h := healthyObservation()
	s.obs.Creds, s.obs.PodsObserved, s.obs.Pods = h.Creds, true, h.Pods
	return s, &progressReporter{r: r, s: s, ctx: context.Background(), desired: desired}
}

// A pass whose engine waits on Redis writes the status at once when the
// wait's observation is a fault and the status says Ready: a Ready read
// while every pod was deleted and the engine waited out its budget was the
// field's (and CI's) stale status. A wait that is no fault writes nothing,
// and a pass writes early once at most.
func TestWaitOnFaultWritesStatusAtOnce(t *testing.T) {
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(rc).WithStatusSubresource(rc).Build()
	rec := record.NewFakeRecorder(100)
	r := &RedisClusterReconciler{Client: cl, Recorder: rec}
	now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	view, desired := faultView()

	pass := func(at time.Time) (*scope, *progressReporter) {
		return storedPass(t, r, client.ObjectKeyFromObject(rc), at, desired)
	}
	stored := func() *cachev1beta1.RedisCluster {
		live := &cachev1beta1.RedisCluster{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), live); err != nil {
			t.Fatal(err)
		}
		return live
	}
	wait := func(p *progressReporter, res *topology.Result, reason string) {
		p.report(topology.Progress{Step: "Wait: " + reason, Observed: res})
	}

	// Ready, as a converged pass writes it.
	s, _ := pass(now)
	s.obs.Topology = healthyObservation().Topology
	if err := r.writeStatus(ctx, s, nil, true); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(stored().Status.Conditions, cachev1beta1.RedisClusterReadyCondition) {
		t.Fatalf("not Ready to begin with: %+v", stored().Status.Conditions)
	}
	drain(rec)

	// A wait that is no fault: every node answers and serves its slots.
	rv := stored().ResourceVersion
	_, p := pass(now.Add(time.Minute))
	wait(p, &topology.Result{View: view, Message: "nodes agree on the new epoch"}, "nodes to agree on config epoch 4")
	if got := stored(); got.ResourceVersion != rv || got.Status.Phase != cachev1beta1.PhaseReady {
		t.Errorf("a wait that is no fault wrote the status: phase %s", got.Status.Phase)
	}
	if ev := drain(rec); len(ev) != 0 {
		t.Errorf("a wait that is no fault recorded events: %q", ev)
	}

	// Shard 0's master does not answer; Redis's election decides.
	view.Nodes[0].Err = errors.New("dial tcp: i/o timeout")
	s, p = pass(now.Add(2 * time.Minute))
	reason := "shard c-shard-0: waiting for Redis to promote a replica of master " + ids("a")
	wait(p, &topology.Result{View: view}, reason)
	got := stored()
	ready := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterReadyCondition)
	degraded := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterDegradedCondition)
	if ready.Status != metav1.ConditionFalse || degraded.Status != metav1.ConditionTrue || got.Status.Phase != cachev1beta1.PhaseDegraded {
		t.Fatalf("while the engine waits on an unreachable master: Ready %s, Degraded %s, phase %s; want written Degraded at once",
			ready.Status, degraded.Status, got.Status.Phase)
	}
	if !strings.Contains(degraded.Message, "0-5460") {
		t.Errorf("Degraded does not name the uncovered slots: %q", degraded.Message)
	}
	if s.original.ResourceVersion != got.ResourceVersion {
		t.Errorf("the written status is not the pass's base: %s, stored %s", s.original.ResourceVersion, got.ResourceVersion)
	}
	ev := drain(rec)
	if len(ev) == 0 || !strings.Contains(strings.Join(ev, "\n"), "SlotsUncovered") {
		t.Errorf("events of the early write: %q, want the SlotsUncovered warning", ev)
	}

	// The wait goes on: polls of the same pass write nothing more; the
	// pass's own write at the end diffs against the early one.
	rv = got.ResourceVersion
	for range 3 {
		wait(p, &topology.Result{View: view}, reason)
	}
	if stored().ResourceVersion != rv {
		t.Error("a second early write in one pass")
	}
	if err := r.writeStatus(ctx, s, nil, false); err != nil {
		t.Fatalf("the pass's own write after the early one: %v", err)
	}
	if ev := drain(rec); strings.Contains(strings.Join(ev, "\n"), "SlotsUncovered") {
		t.Errorf("the pass's own write repeated the early write's events: %q", ev)
	}

	// A pass that begins on a status that is not Ready writes nothing early.
	rv = stored().ResourceVersion
	_, p = pass(now.Add(3 * time.Minute))
	wait(p, &topology.Result{View: view}, reason)
	if stored().ResourceVersion != rv {
		t.Error("an early write on a status that was not Ready")
	}
}

// An early write that fails leaves the pass's status as it was: the pass's
// own write at the end, finding the cluster Ready again, does not move
// Ready's lastTransitionTime (the 1-minute settle before masters are
// spread counts from it), since Ready was never stored False.
func TestFailedEarlyWriteLeavesNoTransition(t *testing.T) {
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	failing := false
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(rc).WithStatusSubresource(rc).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if failing {
				return errors.New("the API server timed out")
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	r := &RedisClusterReconciler{Client: cl, Recorder: record.NewFakeRecorder(100), RedisTimeout: time.Second}
	since := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	view, desired := faultView()
	pass := func(at time.Time) (*scope, *progressReporter) {
		s, p := storedPass(t, r, client.ObjectKeyFromObject(rc), at, desired)
		s.obs.Topology = healthyObservation().Topology
		return s, p
	}
	s, _ := pass(since)
	if err := r.writeStatus(ctx, s, nil, true); err != nil {
		t.Fatal(err)
	}

	// An hour later a master does not answer for a moment; the early write
	// fails, the wait ends with the master back, and the pass writes.
	s, p := pass(since.Add(time.Hour))
	view.Nodes[0].Err = errors.New("connection refused")
	failing = true
	p.report(topology.Progress{Step: "Wait: a replica's promotion", Observed: &topology.Result{View: view}})
	failing = false
	if !meta.IsStatusConditionTrue(s.rc.Status.Conditions, cachev1beta1.RedisClusterReadyCondition) {
		t.Fatalf("after a failed early write the pass's status says Ready %v", s.rc.Status.Conditions)
	}
	s.obs.Topology = healthyObservation().Topology
	if err := r.writeStatus(ctx, s, nil, true); err != nil {
		t.Fatal(err)
	}
	live := &cachev1beta1.RedisCluster{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), live); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(live.Status.Conditions, cachev1beta1.RedisClusterReadyCondition)
	if ready.Status != metav1.ConditionTrue || !ready.LastTransitionTime.Time.Equal(since) {
		t.Errorf("Ready %s since %s, want True since %s (it never was stored False)", ready.Status, ready.LastTransitionTime.UTC(), since)
	}
}

// A status write that conflicts because only the object's metadata moved
// on (a label set while the pass waited) is retried on the fresh object
// with everything the pass set, the TLS serials included: before, only
// status.credentials was carried over, and a renewed certificate's serial
// went missing until the next pass.
func TestConflictRetryKeepsThePassStatus(t *testing.T) {
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(rc).WithStatusSubresource(rc).Build()
	r := &RedisClusterReconciler{Client: cl, Recorder: record.NewFakeRecorder(100)}
	s, _ := storedPass(t, r, client.ObjectKeyFromObject(rc), time.Now(), topology.Desired{})
	s.obs.Topology = healthyObservation().Topology
	live := s.rc.DeepCopy()
	s.rc.Status.TLS = &cachev1beta1.TLSStatus{Serial: "02", AppliedSerial: "01"}

	labelled := live.DeepCopy()
	labelled.Labels = map[string]string{"team": "cache"}
	if err := cl.Update(ctx, labelled); err != nil {
		t.Fatal(err)
	}
	if err := r.writeStatus(ctx, s, nil, true); err != nil {
		t.Fatalf("writing after a label change: %v", err)
	}
	stored := &cachev1beta1.RedisCluster{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), stored); err != nil {
		t.Fatal(err)
	}
	if tls := stored.Status.TLS; tls == nil || tls.Serial != "02" || tls.AppliedSerial != "01" {
		t.Errorf("status.tls after the retried write: %+v, want serial 02 applied 01", tls)
	}
	if stored.Status.Phase == "" || stored.Labels["team"] != "cache" {
		t.Errorf("phase %q, labels %v: the retry did not write the pass's status on the fresh object", stored.Status.Phase, stored.Labels)
	}
}
