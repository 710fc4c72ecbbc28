package status

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

func healthyObservation() Observation {
	return Observation{
		DesiredShards:    3,
		ReplicasPerShard: 1,
		Creds:            Credentials{NoAuth: true, Live: true},
		PodsObserved:     true,
		Pods:             Pods{Expected: 6, Ready: 6},
		Topology: &Topology{
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
		mutate    func(o *Observation)
		succeeded bool
		want      want
	}{
		{
			name: "no pod yet", succeeded: true,
			mutate: func(o *Observation) {
				o.Pods = Pods{Expected: 6, NotReady: []string{"c-shard-0-0"}}
				o.Topology = nil
			},
			want: want{"False/PodsPending", "True/PodsPending", "False/PodsPending", "Unknown/NotObservedYet", cachev1beta1.PhasePending, true},
		},
		{
			name: "all pods ready, nothing assigned yet", succeeded: true,
			mutate: func(o *Observation) {
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
			mutate: func(o *Observation) {
				o.DesiredShards = 5
				o.Topology.Converged, o.Topology.SlotsToMove = false, true
				o.Topology.Shards = append(o.Topology.Shards, cachev1beta1.ShardStatus{Name: "c-shard-3"}, cachev1beta1.ShardStatus{Name: "c-shard-4"})
				o.Topology.Migration = &cachev1beta1.MigrationStatus{SlotsMoved: 100, SlotsTotal: 6553}
			},
			want: want{"False/Scaling", "True/Scaling", "False/Ready", "True/Ready", cachev1beta1.PhaseScaling, true},
		},
		{
			// The pass moved the last slots and the engine converged: Ready
			// now, not Scaling until the next resync.
			name: "the pass that finished a scale-out", succeeded: true,
			mutate: func(o *Observation) {
				o.DesiredShards = 5
				o.Topology.Migration = &cachev1beta1.MigrationStatus{SlotsMoved: 6553, SlotsTotal: 6553}
			},
			want: want{"True/Ready", "False/Ready", "False/Ready", "True/Ready", cachev1beta1.PhaseReady, true},
		},
		{
			// Scale-in: this pass deleted the drained shards' StatefulSets;
			// their pods still stop (and were counted): not Ready yet.
			name: "the pass that removed the drained shards", succeeded: true,
			mutate: func(o *Observation) {
				o.Removed = []string{"c-shard-3", "c-shard-4"}
				o.Topology.Migration = &cachev1beta1.MigrationStatus{SlotsMoved: 6553, SlotsTotal: 6553}
			},
			want: want{"False/Scaling", "True/Scaling", "False/Ready", "True/Ready", cachev1beta1.PhaseScaling, true},
		},
		{
			name: "rolling update", succeeded: true,
			mutate: func(o *Observation) { o.StalePods = []string{"c-shard-1-0"} },
			want:   want{"False/Upgrading", "True/Upgrading", "False/Ready", "True/Ready", cachev1beta1.PhaseUpgrading, true},
		},
		{
			name: "a master pod just deleted: its slots have no live master", succeeded: true,
			mutate: func(o *Observation) {
				o.Pods = Pods{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-1"}}
				o.Topology.EngineRan, o.Topology.Converged, o.Topology.SlotsAssigned, o.Topology.StateOK = false, false, 10923, false
			},
			want: want{"False/ClusterStateFail", "True/PodsPending", "True/ClusterStateFail", "False/SlotsUncovered", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a replica pod starting again after its failover", succeeded: true,
			mutate: func(o *Observation) {
				o.Pods = Pods{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-1"}}
				o.Topology.EngineRan, o.Topology.Converged = false, false
			},
			want: want{"False/PodsPending", "True/PodsPending", "False/Ready", "True/Ready", cachev1beta1.PhasePending, true},
		},
		{
			name: "a pod not ready for too long", succeeded: true,
			mutate: func(o *Observation) {
				o.Pods = Pods{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-1"}, Overdue: []string{"c-shard-0-1"}}
				o.Topology.EngineRan, o.Topology.Converged = false, false
			},
			want: want{"False/ReplicaMissing", "True/PodsPending", "True/ReplicaMissing", "True/Ready", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "shard lost", succeeded: true,
			mutate: func(o *Observation) {
				o.Topology.Converged, o.Topology.SlotsAssigned = false, 10923
				o.Topology.DataLoss = &topology.LostShard{Shards: []string{"c-shard-2"}, Slots: []topology.SlotRange{{Start: 10923, End: 16383}}, SlotCount: 5461}
			},
			want: want{"False/ShardLost", "False/ShardLost", "True/ShardLost", "False/ShardLost", cachev1beta1.PhaseDegraded, false},
		},
		{
			name: "formed, then every node came back empty: lost, not bootstrapping", succeeded: true,
			mutate: func(o *Observation) {
				o.FormedBefore = true
				o.Topology.Converged, o.Topology.SlotsAssigned, o.Topology.CurrentShards, o.Topology.StateOK = false, 0, 0, false
				o.Topology.Unassigned = []topology.SlotRange{{Start: 0, End: 16383}}
				o.Topology.DataLoss = &topology.LostShard{Slots: []topology.SlotRange{{Start: 0, End: 16383}}, SlotCount: topology.NumSlots}
			},
			want: want{"False/ShardLost", "False/ShardLost", "True/ShardLost", "False/ShardLost", cachev1beta1.PhaseDegraded, false},
		},
		{
			name: "a master the operator cannot reach: its slots are uncovered", succeeded: true,
			mutate: func(o *Observation) {
				o.Topology.Converged, o.Topology.SlotsAssigned = false, 10923
				o.Topology.Unassigned = []topology.SlotRange{{Start: 0, End: 5460}}
				o.Topology.Unreachable = []string{"c-shard-0-1"}
			},
			want: want{"False/SlotsUncovered", "True/SlotsUncovered", "True/SlotsUncovered", "False/SlotsUncovered", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a shard's nodes came back empty: not scaling (field case R20)", succeeded: true,
			mutate: func(o *Observation) {
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
			mutate: func(o *Observation) {
				o.Topology.Converged = false
				o.Topology.Unreachable = []string{"c-shard-0-0"}
				o.Topology.ReplicasShort = map[string]int{"c-shard-0": 1}
			},
			want: want{"False/RedisUnreachable", "True/RedisUnreachable", "True/RedisUnreachable", "True/Ready", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "failed over: the shard has no reachable replica", succeeded: true,
			mutate: func(o *Observation) {
				o.Pods = Pods{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-1"}, Overdue: nil}
				o.Topology.EngineRan, o.Topology.Converged = false, false
				o.Topology.ReplicasShort = map[string]int{"c-shard-0": 1, "c-shard-1": 1}
			},
			want: want{"False/ReplicaMissing", "True/PodsPending", "True/ReplicaMissing", "True/Ready", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a replica restarting (rolling update) is not a loss of redundancy", succeeded: true,
			mutate: func(o *Observation) {
				o.Pods = Pods{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-0"}}
				o.Topology.EngineRan, o.Topology.Converged = false, false
				o.Topology.ReplicasShort = map[string]int{"c-shard-0": 1}
				o.StalePods = []string{"c-shard-0-0"}
			},
			want: want{"False/Upgrading", "True/Upgrading", "False/Ready", "True/Ready", cachev1beta1.PhaseUpgrading, true},
		},
		{
			// The known limitation a tester found: this said Upgrading for
			// the first PodStartGrace.
			name: "a replica crash-looping in a rolling update degrades at once", succeeded: true,
			mutate: func(o *Observation) {
				o.Pods = Pods{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-1"}, Failing: []string{"c-shard-0-1"}}
				o.Pods.SetState("c-shard-0-1", "CrashLoopBackOff: exit code 1: Bad directive or wrong number of arguments")
				o.Topology.EngineRan, o.Topology.Converged = false, false
				o.Topology.ReplicasShort = map[string]int{"c-shard-0": 1}
				o.StalePods = []string{"c-shard-1-1"}
			},
			want: want{"False/ReplicaMissing", "True/Upgrading", "True/ReplicaMissing", "True/Ready", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a pod that cannot run before the cluster formed", succeeded: true,
			mutate: func(o *Observation) {
				o.Pods = Pods{Expected: 6, NotReady: []string{"c-shard-0-0", "c-shard-0-1"}, Failing: []string{"c-shard-0-1"}}
				o.Pods.SetState("c-shard-0-1", "cannot pull image registry.invalid/redis:7")
				o.Topology = nil
			},
			want: want{"False/ReplicaMissing", "True/PodsPending", "True/ReplicaMissing", "Unknown/NotObservedYet", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a node in fail", succeeded: true,
			mutate: func(o *Observation) { o.Topology.FailedNodes = []string{ids("dead")} },
			want:   want{"False/NodeFailed", "False/Ready", "True/NodeFailed", "True/Ready", cachev1beta1.PhaseDegraded, true},
		},
		{
			name: "a failing step", succeeded: false,
			mutate: func(o *Observation) { o.ReconcileErr = errors.New("topology: authentication failed") },
			want:   want{"False/ReconcileError", "False/Ready", "True/ReconcileError", "True/Ready", cachev1beta1.PhaseDegraded, false},
		},
		{
			name: "invalid spec", succeeded: false,
			mutate: func(o *Observation) {
				o.SpecErr = errors.New(`spec.config: key "port" is set by the operator`)
				o.PodsObserved, o.Topology = false, nil
			},
			want: want{"False/InvalidSpec", "False/InvalidSpec", "True/InvalidSpec", "Unknown/NotObservedYet", cachev1beta1.PhaseFailed, false},
		},
		{
			name: "a restore waiting for its backup", succeeded: true,
			mutate: func(o *Observation) {
				o.RestoreWaiting = "Waiting to restore the backup: RedisClusterBackup b1 is Running, not Completed yet; retried every 15s."
				o.PodsObserved, o.Topology = false, nil
			},
			want: want{"False/RestoreWaiting", "True/RestoreWaiting", "Unknown/NotObservedYet", "Unknown/NotObservedYet", cachev1beta1.PhasePending, true},
		},
		{
			name: "paused and healthy: the planner finds nothing to do", paused: true, succeeded: true,
			mutate: func(o *Observation) { o.Topology.EngineRan, o.Topology.Planned = false, true },
			want:   want{"True/Ready", "False/Ready", "False/Ready", "True/Ready", cachev1beta1.PhaseReady, true},
		},
		{
			name: "paused with work pending", paused: true, succeeded: true,
			mutate: func(o *Observation) { o.StalePods = []string{"c-shard-1-0"} },
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
			Apply(rc, &o, now, tc.succeeded)
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
			Apply(rc, &o, now.Add(time.Hour), tc.succeeded)
			if !equality.Semantic.DeepEqual(*before, rc.Status) {
				t.Errorf("a repeated Observation changed the status:\n%+v\n%+v", *before, rc.Status)
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
	Apply(rc, &o, time.Now(), true)
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

// What announceWork writes before a scale-out's engine run: Observe saw 3
// masters owning slots and spec asks for 8. The status says Scaling (not
// the PodsPending of the pass before) and observedGeneration stays.
func TestInterimStatusBeforeScaling(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 2}, Spec: cachev1beta1.RedisClusterSpec{Shards: 8}}
	rc.Status.ObservedGeneration = 1
	rc.Status.CurrentShards = 3
	o := healthyObservation()
	o.DesiredShards = 8
	o.Pods = Pods{Expected: 16, Ready: 16}
	o.Topology.EngineRan, o.Topology.Converged = false, false
	Apply(rc, &o, time.Now(), false)
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
}

// formedTime is set the first time all slots are seen assigned and kept
// when they no longer are.
func TestFormedTimeRecordedOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1}, Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	o := healthyObservation()
	o.Topology.SlotsAssigned = 100
	Apply(rc, &o, t0, true)
	if rc.Status.FormedTime != nil {
		t.Fatalf("formedTime %v with 100 slots assigned", rc.Status.FormedTime)
	}
	o = healthyObservation()
	Apply(rc, &o, t0.Add(time.Minute), true)
	if rc.Status.FormedTime == nil || !rc.Status.FormedTime.Time.Equal(t0.Add(time.Minute)) {
		t.Fatalf("formedTime %v, want %v", rc.Status.FormedTime, t0.Add(time.Minute))
	}
	o.Topology.SlotsAssigned, o.Topology.Shards = 0, nil
	Apply(rc, &o, t0.Add(time.Hour), true)
	if rc.Status.FormedTime == nil || !rc.Status.FormedTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("formedTime %v after the slots were lost", rc.Status.FormedTime)
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

// A formed cluster whose pass stopped at the credentials (the generated
// password's Secret is gone) gets a status naming that, not a panic over
// the Redis observation it never made.
func TestStatusOfAFormedClusterStoppedAtCredentials(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{}
	rc.Name, rc.Generation = "c", 2
	o := &Observation{FormedBefore: true, DesiredShards: 3, ReplicasPerShard: 1,
		Creds: Credentials{Source: SourceGenerated, Err: errors.New("secret c-auth is gone; restore it"),
			Reason: cachev1beta1.RedisClusterGeneratedSecretLostReason}}
	Apply(rc, o, time.Now(), true)
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

// A pod that does not run is named with why, whatever else is going on:
// pods pending, a scale-out that goes on without it, the redundancy it
// costs once overdue.
func TestConditionsNameThePodWaitedFor(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sick := func(o *Observation) {
		o.Pods = Pods{Expected: 6, Ready: 5, NotReady: []string{"c-shard-1-1"}}
		o.Pods.SetState("c-shard-1-1", "Pending")
	}
	for _, tc := range []struct {
		name, cond, want string
		mutate           func(o *Observation)
	}{
		{name: "pods pending", cond: cachev1beta1.RedisClusterProgressingCondition,
			want: "5 of 6 pods ready; waiting for pod c-shard-1-1 (Pending).", mutate: sick},
		{name: "scaling out around it", cond: cachev1beta1.RedisClusterProgressingCondition,
			want: "Scaling to 4 shards (3 own slots now). Waiting for pod c-shard-1-1 (Pending).",
			mutate: func(o *Observation) {
				sick(o)
				o.DesiredShards = 4
				o.Topology.Converged, o.Topology.SlotsToMove = false, true
				o.Topology.Shards = append(o.Topology.Shards, cachev1beta1.ShardStatus{Name: "c-shard-3"})
			}},
		{name: "scaling out, every pod ready, the new shard held back", cond: cachev1beta1.RedisClusterProgressingCondition,
			want: "Scaling to 4 shards (3 own slots now). Cluster not ready: shard c-shard-3 receives 4096 slots once clients can be sent to c-shard-3-0: its Service c-shard-3-0-external has no external address yet.",
			mutate: func(o *Observation) {
				o.DesiredShards = 4
				o.Topology.Converged, o.Topology.SlotsToMove = false, true
				o.Topology.Shards = append(o.Topology.Shards, cachev1beta1.ShardStatus{Name: "c-shard-3"})
				o.Topology.EngineErr = fmt.Errorf("%w: shard c-shard-3 receives 4096 slots once clients can be sent to c-shard-3-0: its Service c-shard-3-0-external has no external address yet", topology.ErrNotReady)
			}},
		{name: "overdue", cond: cachev1beta1.RedisClusterDegradedCondition,
			want:   "Pods not ready for more than 2m0s; waiting for pod c-shard-1-1 (Pending).",
			mutate: func(o *Observation) { sick(o); o.Pods.Overdue = o.Pods.NotReady }},
		{name: "cannot run", cond: cachev1beta1.RedisClusterDegradedCondition,
			want: "Pods that cannot run: pod c-shard-1-1 (CrashLoopBackOff: exit code 1: Bad directive or wrong number of arguments); " +
				"fix what stops them (the pod's events and log say more).",
			mutate: func(o *Observation) {
				sick(o)
				o.Pods.Failing = o.Pods.NotReady
				o.Pods.SetState("c-shard-1-1", "CrashLoopBackOff: exit code 1: Bad directive or wrong number of arguments")
			}},
		{name: "one cannot run, one overdue", cond: cachev1beta1.RedisClusterDegradedCondition,
			want: "Pods that cannot run: pod c-shard-2-0 (cannot pull image registry.invalid/redis:7); fix what stops them (the pod's events and log say more). " +
				"Pods not ready for more than 2m0s; waiting for pod c-shard-1-1 (Pending).",
			mutate: func(o *Observation) {
				sick(o)
				o.Pods.Overdue = o.Pods.NotReady
				o.Pods.Ready, o.Pods.NotReady, o.Pods.Failing = 4, append(o.Pods.NotReady, "c-shard-2-0"), []string{"c-shard-2-0"}
				o.Pods.SetState("c-shard-2-0", "cannot pull image registry.invalid/redis:7")
			}},
		{name: "two pods", cond: cachev1beta1.RedisClusterProgressingCondition,
			want: "4 of 6 pods ready; waiting for pods c-shard-1-1 (Pending), c-shard-2-0 (missing).",
			mutate: func(o *Observation) {
				sick(o)
				o.Pods.Ready, o.Pods.NotReady = 4, append(o.Pods.NotReady, "c-shard-2-0")
				o.Pods.SetState("c-shard-2-0", "missing")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := healthyObservation()
			tc.mutate(&o)
			rc := &cachev1beta1.RedisCluster{}
			rc.Spec.Shards = int32(o.DesiredShards)
			Apply(rc, &o, now, true)
			if c := meta.FindStatusCondition(rc.Status.Conditions, tc.cond); c == nil || c.Message != tc.want {
				t.Fatalf("%s: %+v, want message %q", tc.cond, c, tc.want)
			}
		})
	}
}

// TestNotReadyWhileNodesCatchUp: a healthy cluster in which not every node
// has caught up yet is Progressing, naming what, and not Ready (Degraded
// stays False); once every node has, it is Ready again:
//   - a new TLS certificate not every node serves (ApplyingCertificate,
//     naming the serial): a client verifying a new pod's address against
//     the old certificate fails its handshake;
//   - with spec.externalAccess, a node that does not know another's
//     per-pod Service address (AnnouncingAddresses, naming both): that
//     node's MOVED replies would name the other as "?".
func TestNotReadyWhileNodesCatchUp(t *testing.T) {
	for _, tc := range []struct {
		name, reason, named string
		pending             func(o *Observation, on bool)
	}{
		{"certificate", cachev1beta1.RedisClusterApplyingCertificateReason, "7f3a", func(o *Observation, on bool) {
			o.CertificatePending = map[bool]string{true: "7f3a"}[on]
		}},
		{"addresses", cachev1beta1.RedisClusterAnnouncingAddressesReason, "c-shard-2-1's address 10.96.0.7", func(o *Observation, on bool) {
			o.AnnouncePending = map[bool]string{true: "pod c-shard-0-0 does not know pod c-shard-2-1's address 10.96.0.7 yet"}[on]
		}},
		// The pass that shrinks a shard's StatefulSet observed the topology converged
		// before it did: the removed replica's node is still in every table (CI of
		// 2026-12-07: Ready with 7 known nodes of 6).
		{"replicas-removed", cachev1beta1.RedisClusterScalingReason, "Removing replicas: c-shard-2 down to 2 pods each", func(o *Observation, on bool) {
			o.ReplicasRemoved = map[bool][]string{true: {"c-shard-2"}}[on]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1},
				Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
			o := healthyObservation()
			tc.pending(&o, true)
			Apply(rc, &o, time.Now(), true)
			ready := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterReadyCondition)
			prog := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterProgressingCondition)
			degraded := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterDegradedCondition)
			if ready.Status != metav1.ConditionFalse || ready.Reason != tc.reason {
				t.Errorf("Ready %s/%s, want False/%s", ready.Status, ready.Reason, tc.reason)
			}
			if prog.Status != metav1.ConditionTrue || !strings.Contains(prog.Message, tc.named) {
				t.Errorf("Progressing %s %q, want True naming %q", prog.Status, prog.Message, tc.named)
			}
			if degraded.Status != metav1.ConditionFalse {
				t.Errorf("Degraded %s/%s", degraded.Status, degraded.Reason)
			}
			tc.pending(&o, false)
			Apply(rc, &o, time.Now(), true)
			if ready := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterReadyCondition); ready.Status != metav1.ConditionTrue {
				t.Errorf("Ready %s/%s once every node caught up, want True", ready.Status, ready.Reason)
			}
		})
	}
}

// A fresh cluster's masters get their slots while its replicas still start, before any node
// met another: that is bootstrap (no Degraded, no formedTime) until every slot has an owner
// and the nodes have met.
func TestFreshClusterMastersUpFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1}, Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	for _, assigned := range []int{5462, topology.NumSlots} {
		o := healthyObservation()
		o.Fresh = true
		o.Pods = Pods{Expected: 6, Ready: 3, NotReady: []string{"c-shard-0-1", "c-shard-1-1", "c-shard-2-1"}}
		o.Topology.Converged, o.Topology.StateOK, o.Topology.KnownNodes, o.Topology.SlotsAssigned = false, false, 1, assigned
		Apply(rc, &o, t0, true)
		if rc.Status.Phase == cachev1beta1.PhaseDegraded || rc.Status.FormedTime != nil {
			t.Fatalf("%d slots on masters that met no one: phase %s, formedTime %v; want bootstrap, none", assigned, rc.Status.Phase, rc.Status.FormedTime)
		}
	}
	o := healthyObservation()
	o.Fresh = true
	Apply(rc, &o, t0.Add(time.Minute), true)
	if rc.Status.FormedTime == nil || rc.Status.Phase != cachev1beta1.PhaseReady {
		t.Fatalf("met and covered: phase %s, formedTime %v", rc.Status.Phase, rc.Status.FormedTime)
	}
}
