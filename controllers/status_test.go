package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

func healthyObservation() observation {
	return observation{
		DesiredShards:    3,
		ReplicasPerShard: 1,
		Creds:            credentialsObservation{NoAuth: true, Live: true},
		PodsObserved:     true,
		Pods:             podsObservation{Expected: 6, Ready: 6},
		Topology: &topologyObservation{
			EngineRan: true, Converged: true, SlotsAssigned: topology.NumSlots, StateOK: true, KnownNodes: 6, CurrentShards: 3,
			Shards: []cachev1beta1.ShardStatus{{Name: "c-shard-0", MasterPod: "c-shard-0-1", ReplicaPods: []string{"c-shard-0-0"}, Slots: []string{"0-5460"}}},
		},
	}
}

func TestApplyObservation(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	type want struct {
		ready, progressing, degraded, slots string // "Status/Reason"
		phase                               cachev1beta1.Phase
		observed                            bool
	}
	for _, tc := range []struct {
		name      string
		paused    bool
		mutate    func(o *observation)
		succeeded bool
		want      want
	}{
		{
			name: "no pod yet", succeeded: true,
			mutate: func(o *observation) {
				o.Pods = podsObservation{Expected: 6, NotReady: []string{"c-shard-0-0"}}
				o.Topology = nil
			},
			want: want{"False/PodsPending", "True/PodsPending", "False/PodsPending", "Unknown/NotObservedYet", cachev1beta1.PhasePending, true},
		},
		{
			name: "all pods ready, nothing assigned yet", succeeded: true,
			mutate: func(o *observation) {
				o.Topology.Converged, o.Topology.SlotsAssigned, o.Topology.CurrentShards, o.Topology.StateOK = false, 0, 0, false
			},
			want: want{"False/Bootstrapping", "True/Bootstrapping", "False/Bootstrapping", "False/SlotsUncovered", cachev1beta1.PhaseBootstrapping, true},
		},
		{
			name: "healthy", succeeded: true,
			want: want{"True/Ready", "False/Ready", "False/Ready", "True/Ready", cachev1beta1.PhaseReady, true},
		},
		{
			name: "scaling out: new shards own nothing yet", succeeded: true,
			mutate: func(o *observation) {
				o.DesiredShards = 5
				o.Topology.Converged, o.Topology.SlotsToMove = false, true
				o.Topology.Shards = append(o.Topology.Shards, cachev1beta1.ShardStatus{Name: "c-shard-3"}, cachev1beta1.ShardStatus{Name: "c-shard-4"})
				o.Topology.Migration = &cachev1beta1.MigrationStatus{SlotsMoved: 100, SlotsTotal: 6553}
			},
			want: want{"False/Scaling", "True/Scaling", "False/Ready", "True/Ready", cachev1beta1.PhaseScaling, true},
		},
		{
			name: "rolling update", succeeded: true,
			mutate: func(o *observation) { o.StalePods = []string{"c-shard-1-0"} },
			want:   want{"False/Upgrading", "True/Upgrading", "False/Ready", "True/Ready", cachev1beta1.PhaseUpgrading, true},
		},
		{
			name: "a master pod just deleted: its slots have no live master", succeeded: true,
			mutate: func(o *observation) {
				o.Pods = podsObservation{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-1"}}
				o.Topology.EngineRan, o.Topology.Converged, o.Topology.SlotsAssigned, o.Topology.StateOK = false, false, 10923, false
			},
			want: want{"False/ClusterStateFail", "True/PodsPending", "True/ClusterStateFail", "False/SlotsUncovered", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a replica pod starting again after its failover", succeeded: true,
			mutate: func(o *observation) {
				o.Pods = podsObservation{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-1"}}
				o.Topology.EngineRan, o.Topology.Converged = false, false
			},
			want: want{"False/PodsPending", "True/PodsPending", "False/Ready", "True/Ready", cachev1beta1.PhasePending, true},
		},
		{
			name: "a pod not ready for too long", succeeded: true,
			mutate: func(o *observation) {
				o.Pods = podsObservation{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-1"}, Overdue: []string{"c-shard-0-1"}}
				o.Topology.EngineRan, o.Topology.Converged = false, false
			},
			want: want{"False/ReplicaMissing", "True/PodsPending", "True/ReplicaMissing", "True/Ready", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "shard lost", succeeded: true,
			mutate: func(o *observation) {
				o.Topology.Converged, o.Topology.SlotsAssigned = false, 10923
				o.Topology.DataLoss = &topology.LostShard{Shards: []string{"c-shard-2"}, Slots: []topology.SlotRange{{Start: 10923, End: 16383}}, SlotCount: 5461}
			},
			want: want{"False/ShardLost", "False/ShardLost", "True/ShardLost", "False/ShardLost", cachev1beta1.PhaseDegraded, false},
		},
		{
			name: "formed, then every node came back empty: lost, not bootstrapping", succeeded: true,
			mutate: func(o *observation) {
				o.FormedBefore = true
				o.Topology.Converged, o.Topology.SlotsAssigned, o.Topology.CurrentShards, o.Topology.StateOK = false, 0, 0, false
				o.Topology.Unassigned = []topology.SlotRange{{Start: 0, End: 16383}}
				o.Topology.DataLoss = &topology.LostShard{Slots: []topology.SlotRange{{Start: 0, End: 16383}}, SlotCount: topology.NumSlots}
			},
			want: want{"False/ShardLost", "False/ShardLost", "True/ShardLost", "False/ShardLost", cachev1beta1.PhaseDegraded, false},
		},
		{
			name: "a master the operator cannot reach: its slots are uncovered", succeeded: true,
			mutate: func(o *observation) {
				o.Topology.Converged, o.Topology.SlotsAssigned = false, 10923
				o.Topology.Unassigned = []topology.SlotRange{{Start: 0, End: 5460}}
				o.Topology.Unreachable = []string{"c-shard-0-1"}
			},
			want: want{"False/SlotsUncovered", "True/SlotsUncovered", "True/SlotsUncovered", "False/SlotsUncovered", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a shard's nodes came back empty: not scaling (field case R20)", succeeded: true,
			mutate: func(o *observation) {
				o.PreviousShards = []cachev1beta1.ShardStatus{{Name: "c-shard-0", MasterNodeID: ids("a"), Slots: []string{"0-5460"}}}
				o.Topology.EngineRan, o.Topology.Planned, o.Topology.Converged = false, true, false
				o.Topology.SlotsAssigned, o.Topology.CurrentShards, o.Topology.StateOK, o.Topology.SlotsToMove = 10923, 2, false, true
				o.Topology.Unassigned = []topology.SlotRange{{Start: 0, End: 5460}}
				o.Topology.Shards = []cachev1beta1.ShardStatus{{Name: "c-shard-0", ReplicaPods: []string{"c-shard-0-1"}}}
			},
			want: want{"False/ClusterStateFail", "True/SlotsUncovered", "True/ClusterStateFail", "False/SlotsUncovered", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a ready pod whose Redis does not answer, the engine ran", succeeded: true,
			mutate: func(o *observation) {
				o.Topology.Converged = false
				o.Topology.Unreachable = []string{"c-shard-0-0"}
				o.Topology.ReplicasShort = map[string]int{"c-shard-0": 1}
			},
			want: want{"False/RedisUnreachable", "True/RedisUnreachable", "True/RedisUnreachable", "True/Ready", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "failed over: the shard has no reachable replica", succeeded: true,
			mutate: func(o *observation) {
				o.Pods = podsObservation{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-1"}, Overdue: nil}
				o.Topology.EngineRan, o.Topology.Converged = false, false
				o.Topology.ReplicasShort = map[string]int{"c-shard-0": 1, "c-shard-1": 1}
			},
			want: want{"False/ReplicaMissing", "True/PodsPending", "True/ReplicaMissing", "True/Ready", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a replica restarting (rolling update) is not a loss of redundancy", succeeded: true,
			mutate: func(o *observation) {
				o.Pods = podsObservation{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-0"}}
				o.Topology.EngineRan, o.Topology.Converged = false, false
				o.Topology.ReplicasShort = map[string]int{"c-shard-0": 1}
				o.StalePods = []string{"c-shard-0-0"}
			},
			want: want{"False/Upgrading", "True/Upgrading", "False/Ready", "True/Ready", cachev1beta1.PhaseUpgrading, true},
		},
		{
			name: "a node in fail", succeeded: true,
			mutate: func(o *observation) { o.Topology.FailedNodes = []string{ids("dead")} },
			want:   want{"False/NodeFailed", "False/Ready", "True/NodeFailed", "True/Ready", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a failing step", succeeded: false,
			mutate: func(o *observation) { o.ReconcileErr = errors.New("topology: authentication failed") },
			want:   want{"False/ReconcileError", "False/Ready", "True/ReconcileError", "True/Ready", cachev1beta1.PhaseDegraded, false},
		},
		{
			name: "invalid spec", succeeded: false,
			mutate: func(o *observation) {
				o.SpecErr = errors.New(`spec.config: key "port" is set by the operator`)
				o.PodsObserved, o.Topology = false, nil
			},
			want: want{"False/InvalidSpec", "False/InvalidSpec", "True/InvalidSpec", "Unknown/NotObservedYet", cachev1beta1.PhaseFailed, false},
		},
		{
			name: "paused and healthy: the planner finds nothing to do", paused: true, succeeded: true,
			mutate: func(o *observation) { o.Topology.EngineRan, o.Topology.Planned = false, true },
			want:   want{"True/Ready", "False/Ready", "False/Ready", "True/Ready", cachev1beta1.PhaseReady, true},
		},
		{
			name: "paused with work pending", paused: true, succeeded: true,
			mutate: func(o *observation) { o.StalePods = []string{"c-shard-1-0"} },
			want:   want{"False/Upgrading", "False/Paused", "False/Ready", "True/Ready", cachev1beta1.PhaseUpgrading, true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 4},
				Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1, Paused: tc.paused}}
			rc.Status.ObservedGeneration = 3
			o := healthyObservation()
			if tc.mutate != nil {
				tc.mutate(&o)
			}
			applyObservation(rc, &o, now, tc.succeeded)
			got := func(typ string) string {
				c := meta.FindStatusCondition(rc.Status.Conditions, typ)
				if c == nil {
					return "missing"
				}
				if c.Message == "" || c.ObservedGeneration != 4 {
					t.Errorf("%s: message %q, observedGeneration %d", typ, c.Message, c.ObservedGeneration)
				}
				return string(c.Status) + "/" + c.Reason
			}
			for typ, w := range map[string]string{
				cachev1beta1.RedisClusterReadyCondition:         tc.want.ready,
				cachev1beta1.RedisClusterProgressingCondition:   tc.want.progressing,
				cachev1beta1.RedisClusterDegradedCondition:      tc.want.degraded,
				cachev1beta1.RedisClusterSlotsAssignedCondition: tc.want.slots,
			} {
				if g := got(typ); g != w {
					t.Errorf("%s = %s, want %s", typ, g, w)
				}
			}
			wantPaused := "False/NotPaused"
			if tc.paused {
				wantPaused = "True/Paused"
			}
			if g := got(cachev1beta1.RedisClusterPausedCondition); g != wantPaused {
				t.Errorf("Paused = %s", g)
			}
			if g := got(cachev1beta1.RedisClusterCredentialsReadyCondition); g != "True/NoAuth" {
				t.Errorf("CredentialsReady = %s", g)
			}
			if rc.Status.Phase != tc.want.phase {
				t.Errorf("phase %s, want %s", rc.Status.Phase, tc.want.phase)
			}
			if moved := rc.Status.ObservedGeneration == 4; moved != tc.want.observed {
				t.Errorf("observedGeneration moved = %v, want %v", moved, tc.want.observed)
			}
			if len(rc.Status.Conditions) != 6 {
				t.Errorf("%d conditions", len(rc.Status.Conditions))
			}

			// The same observation later changes nothing: no status write.
			before := rc.Status.DeepCopy()
			applyObservation(rc, &o, now.Add(time.Hour), tc.succeeded)
			if !equality.Semantic.DeepEqual(*before, rc.Status) {
				t.Errorf("a repeated observation changed the status:\n%+v\n%+v", *before, rc.Status)
			}
		})
	}
}

// The Degraded and SlotsAssigned messages name what they are about: the
// shard without a reachable replica, the uncovered slot ranges.
func TestDegradedNamesTheShardAndSlots(t *testing.T) {
	o := healthyObservation()
	o.Topology.ReplicasShort = map[string]int{"c-shard-2": 1}
	if c := degradedCondition(&o); c.status != metav1.ConditionTrue || !strings.Contains(c.message, "c-shard-2 (0 of 1 replicas reachable)") {
		t.Errorf("Degraded %+v, want the shard named", c)
	}
	o = healthyObservation()
	o.Topology.SlotsAssigned = 10923
	o.Topology.Unassigned = []topology.SlotRange{{Start: 5461, End: 10922}}
	o.PreviousShards = lostShardStatus().Shards
	for _, c := range []conditionResult{degradedCondition(&o), slotsCondition(&o)} {
		if !strings.Contains(c.message, "5461-10922 (last held by c-shard-1)") {
			t.Errorf("%s: %q does not name the uncovered range and its shard", c.reason, c.message)
		}
	}
}

func TestStatusShardsAndCounts(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1}, Spec: cachev1beta1.RedisClusterSpec{Shards: 3}}
	o := healthyObservation()
	applyObservation(rc, &o, time.Now(), true)
	if rc.Status.MasterPod != "c-shard-0-1" || rc.Status.ReadyReplicas != 6 || rc.Status.CurrentShards != 3 || len(rc.Status.Shards) != 1 {
		t.Errorf("status %+v", rc.Status)
	}
	if rc.Status.Selector != "app.kubernetes.io/instance=c,app.kubernetes.io/name=redis,cache.redis.io/cluster=c" {
		t.Errorf("selector %q", rc.Status.Selector)
	}
	if rc.Status.Credentials != nil {
		t.Errorf("credentials without auth: %+v", rc.Status.Credentials)
	}
}

func TestDeletionVerdict(t *testing.T) {
	req := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	failed := errors.New("claim data-x-shard-0-0 is not deleted yet")
	for _, tc := range []struct {
		name             string
		after            time.Duration
		err              error
		remove, timedOut bool
		retryAfter       time.Duration
	}{
		{name: "cleanup done", after: time.Second, remove: true},
		{name: "cleanup pending", after: 10 * time.Second, err: failed, retryAfter: deletionRetry},
		{name: "retry never passes the deadline", after: time.Minute - 500*time.Millisecond, err: failed, retryAfter: 500 * time.Millisecond},
		{name: "deadline reached", after: time.Minute, err: failed, remove: true, timedOut: true},
		{name: "long past the deadline", after: time.Hour, err: failed, remove: true, timedOut: true},
	} {
		remove, timedOut, retry := deletionVerdict(req.Add(tc.after), req, time.Minute, tc.err)
		if remove != tc.remove || timedOut != tc.timedOut || retry != tc.retryAfter {
			t.Errorf("%s: got %v %v %v, want %v %v %v", tc.name, remove, timedOut, retry, tc.remove, tc.timedOut, tc.retryAfter)
		}
	}
}

// What announceWork writes before a scale-out's engine run: Observe saw 3
// masters owning slots and spec asks for 8. The status says Scaling (not
// the PodsPending of the pass before) and observedGeneration stays.
func TestInterimStatusBeforeScaling(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 2}, Spec: cachev1beta1.RedisClusterSpec{Shards: 8}}
	rc.Status.ObservedGeneration = 1
	rc.Status.CurrentShards = 3
	if !shardCountChanging(rc, &observation{}) {
		t.Fatal("3 shards counted, 8 wanted: announceWork would not look")
	}
	o := healthyObservation()
	o.DesiredShards = 8
	o.Pods = podsObservation{Expected: 16, Ready: 16}
	o.Topology.EngineRan, o.Topology.Converged = false, false
	applyObservation(rc, &o, time.Now(), false)
	if rc.Status.Phase != cachev1beta1.PhaseScaling {
		t.Errorf("phase %s, want Scaling", rc.Status.Phase)
	}
	if c := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterProgressingCondition); c == nil ||
		c.Status != metav1.ConditionTrue || c.Reason != cachev1beta1.RedisClusterScalingReason {
		t.Errorf("Progressing %+v, want True/Scaling", c)
	}
	if rc.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration %d moved in an interim write", rc.Status.ObservedGeneration)
	}

	settled := &cachev1beta1.RedisCluster{Spec: cachev1beta1.RedisClusterSpec{Shards: 3}}
	settled.Status.CurrentShards = 3
	if shardCountChanging(settled, &observation{}) {
		t.Error("a settled cluster would be observed twice per pass")
	}
	if !shardCountChanging(settled, &observation{Leaving: []string{"c-shard-3"}}) {
		t.Error("a leaving shard is scaling")
	}
}

// A migration spans passes (each bounded by PassBudget): status.migration
// counts from the migration's start, not from the pass's.
func TestMigrationProgressSpansPasses(t *testing.T) {
	first := &progressReporter{last: topology.Progress{SlotsMoved: 100, SlotsTotal: 4096, KeysMoved: 5000}}
	m := first.migration()
	if m.SlotsMoved != 100 || m.SlotsTotal != 4096 || m.KeysMoved != 5000 {
		t.Fatalf("first pass: %+v", m)
	}
	// The next pass plans the 3996 slots left.
	next := &progressReporter{before: m, last: topology.Progress{SlotsMoved: 96, SlotsTotal: 3996, KeysMoved: 4000}}
	if m := next.migration(); m.SlotsMoved != 196 || m.SlotsTotal != 4096 || m.KeysMoved != 9000 {
		t.Fatalf("second pass: %+v, want 196 of 4096 slots, 9000 keys", m)
	}
	// A finished migration does not carry into a new one.
	done := &cachev1beta1.MigrationStatus{SlotsMoved: 4096, SlotsTotal: 4096, KeysMoved: 200000}
	fresh := &progressReporter{before: done, last: topology.Progress{SlotsMoved: 10, SlotsTotal: 2048, KeysMoved: 30}}
	if m := fresh.migration(); m.SlotsMoved != 10 || m.SlotsTotal != 2048 || m.KeysMoved != 30 {
		t.Fatalf("new migration: %+v", m)
	}
	if (&progressReporter{before: m}).migration() != nil {
		t.Fatal("a pass that moved nothing reports no migration")
	}
}

// A formed cluster whose pass stopped at the credentials (the generated
// password's Secret is gone) gets a status naming that, not a panic over
// the Redis observation it never made.
func TestStatusOfAFormedClusterStoppedAtCredentials(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{}
	rc.Name, rc.Generation = "c", 2
	o := &observation{FormedBefore: true, DesiredShards: 3, ReplicasPerShard: 1,
		Creds: credentialsObservation{Source: credentialsGenerated, Err: errors.New("secret c-auth is gone; restore it"),
			Reason: cachev1beta1.RedisClusterGeneratedSecretLostReason}}
	applyObservation(rc, o, time.Now(), true)
	for typ, want := range map[string]string{
		cachev1beta1.RedisClusterReadyCondition:            "False/GeneratedSecretLost",
		cachev1beta1.RedisClusterCredentialsReadyCondition: "False/GeneratedSecretLost",
	} {
		c := meta.FindStatusCondition(rc.Status.Conditions, typ)
		if c == nil || string(c.Status)+"/"+c.Reason != want || !strings.Contains(c.Message, "restore it") {
			t.Errorf("%s = %+v, want %s naming what to do", typ, c, want)
		}
	}
}
