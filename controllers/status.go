package controllers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// podStartGrace is how long a pod may be missing or not ready before it
// counts as lost redundancy (Degraded) rather than as starting (Progressing).
const podStartGrace = 2 * time.Minute

// observation is what one reconcile pass learned. The status setters below
// turn it into conditions, phase and counts; they are pure functions of
// the observation, the object and the time.
type observation struct {
	// SpecErr: the spec can never be reconciled as written.
	SpecErr error
	// ReconcileErr: a step of this pass failed (API call, Redis command);
	// it is retried with backoff.
	ReconcileErr error

	Creds credentialsObservation
	// PodsObserved is false when the pass stopped before listing pods.
	PodsObserved bool
	Pods         podsObservation

	// Topology is nil when no Redis node was observed this pass.
	Topology *topologyObservation

	// DesiredShards is spec.shards; Leaving names shards being removed
	// (status.leavingShards).
	DesiredShards int
	Leaving       []string
	// ReplicasPerShard is spec.replicasPerShard.
	ReplicasPerShard int
	// FormedBefore: status recorded that the cluster was formed (see
	// formedBefore), so slots without an owner are lost data, not a
	// cluster to bootstrap.
	FormedBefore bool
	// LostBefore is the message of the ShardLost verdict the status held
	// when the pass began ("" if none): a pass that cannot judge the loss
	// (the engine did not run) keeps it rather than flapping to another
	// reason.
	LostBefore string
	// PreviousShards is status.shards as the pass found it: the last known
	// master and slot ranges of each shard.
	PreviousShards []cachev1beta1.ShardStatus
	// StalePods are pods whose template hash differs from their
	// StatefulSet's: a rolling update is under way.
	StalePods []string
}

// credentialsObservation is the outcome of reading spec.auth.
type credentialsObservation struct {
	NoAuth  bool
	Source  string // "Secret" or "Vault"
	Version string // never the password
	// Reason and Err are set when the source could not be read.
	Reason string
	Err    error
	// Live reports whether the owned Secret holds a password the pods can use.
	Live bool
	// RotationStep is the password rotation's step ("" when none) and
	// RotationTarget the source version it rotates to.
	RotationStep, RotationTarget string
}

// podsObservation counts the Redis pods the StatefulSets should run.
type podsObservation struct {
	Expected int
	Ready    int
	// NotReady are the expected pods missing or not ready, by name.
	NotReady []string
	// Overdue are the NotReady pods missing or not ready for longer than
	// podStartGrace.
	Overdue []string
}

// topologyObservation summarises a ClusterView and, when the engine ran,
// its Result.
type topologyObservation struct {
	// EngineRan: Reconcile was called (all pods ready, not paused).
	EngineRan bool
	// Planned: the engine's planner judged an observation instead
	// (paused, or pods not ready), so Converged says whether Reconcile
	// would have anything to do.
	Planned   bool
	Converged bool
	Message   string
	// EngineErr is an engine error that is expected to clear by itself
	// (ErrNotReady, a deadline in a long migration); other engine errors
	// are observation.ReconcileErr.
	EngineErr error

	SlotsAssigned int
	// Unassigned are the slot ranges no reachable master owns.
	Unassigned    []topology.SlotRange
	OpenSlots     bool
	StateOK       bool
	KnownNodes    int
	Unreachable   []string
	CurrentShards int
	// UnevenOrMissing: desired shards that own no slots, or leaving shards
	// that still do (slots must move).
	SlotsToMove bool
	// ShortOfReplicas names desired shards with fewer replicas than spec.
	ShortOfReplicas []string
	// ReplicasShort maps each desired shard that owns slots to how many
	// reachable replicas it lacks (only shards that lack some).
	ReplicasShort map[string]int
	// FailedNodes are the nodes a reachable node flags fail (a majority
	// of masters agreed they are unreachable), by pod name when known,
	// else by node ID.
	FailedNodes []string

	Shards    []cachev1beta1.ShardStatus
	DataLoss  *topology.LostShard
	Migration *cachev1beta1.MigrationStatus
}

// formed reports whether the cluster has ever been set up: status says
// so, or some slot is assigned now. Before that, missing pods and
// unassigned slots are bootstrap, not degradation.
func (o *observation) formed() bool {
	return o.FormedBefore || (o.Topology != nil && o.Topology.SlotsAssigned > 0)
}

// conditionResult is one computed condition.
type conditionResult struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

// setCondition sets one condition on rc with the current generation;
// meta.SetStatusCondition keeps lastTransitionTime unless the status flips.
func setCondition(rc *cachev1beta1.RedisCluster, condType string, c conditionResult, now time.Time) {
	meta.SetStatusCondition(&rc.Status.Conditions, metav1.Condition{
		Type:               condType,
		Status:             c.status,
		Reason:             c.reason,
		Message:            c.message,
		ObservedGeneration: rc.Generation,
		LastTransitionTime: metav1.NewTime(now),
	})
}

// pausedCondition: True while spec.paused.
func pausedCondition(rc *cachev1beta1.RedisCluster) conditionResult {
	if rc.Spec.Paused {
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterPausedReason,
			"spec.paused is true: no slot moves, failovers, joins or rolling restarts; status is still observed."}
	}
	return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterNotPausedReason, "spec.paused is false."}
}

// credentialsCondition: whether the password source was read and the
// password is in the operator-owned Secret the pods load.
func credentialsCondition(rc *cachev1beta1.RedisCluster, o *observation) conditionResult {
	c := o.Creds
	switch {
	case c.NoAuth:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterNoAuthReason,
			"spec.auth is unset: Redis runs without a password."}
	case c.Err != nil:
		msg := fmt.Sprintf("Cannot read the password from %s: %v.", c.Source, c.Err)
		if c.Live {
			msg += " Redis keeps the last good password."
		}
		return conditionResult{metav1.ConditionFalse, c.Reason, msg}
	default:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterCredentialsReadyReason,
			fmt.Sprintf("The password from %s (version %s) is in Secret %s.", c.Source, c.Version, ownedSecretName(rc))}
	}
}

// slotsCondition: all 16384 slots owned, none open.
func slotsCondition(o *observation) conditionResult {
	t := o.Topology
	switch {
	case t == nil:
		return conditionResult{metav1.ConditionUnknown, cachev1beta1.RedisClusterUnknownReason,
			fmt.Sprintf("No Redis node observed yet (%d of %d pods ready).", o.Pods.Ready, o.Pods.Expected)}
	case t.OpenSlots:
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterOpenSlotsReason,
			"Some slots are importing or migrating; the operator finishes or rolls back the move."}
	case t.SlotsAssigned < topology.NumSlots && o.lostMessage() != "":
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterShardLostReason,
			fmt.Sprintf("%d of %d slots are assigned; slots %s have no owner: they were lost with their shard (see Degraded).",
				t.SlotsAssigned, topology.NumSlots, rangesText(t.Unassigned))}
	case t.SlotsAssigned < topology.NumSlots:
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterSlotsUncoveredReason,
			fmt.Sprintf("%d of %d slots are assigned to a live master; no reachable master owns %s.",
				t.SlotsAssigned, topology.NumSlots, uncoveredText(o))}
	default:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterReadyReason,
			fmt.Sprintf("All %d slots are assigned.", topology.NumSlots)}
	}
}

// degradedCondition: the cluster serves with reduced redundancy or not at
// all, or a step keeps failing. Before the cluster is formed only a bad
// spec or a failing step degrade it. It reflects the last observation: a
// master the operator cannot reach (its slots are uncovered), a shard with
// fewer reachable replicas than spec that no starting pod explains, a node
// Redis flags fail.
func degradedCondition(o *observation) conditionResult {
	t := o.Topology
	lost := o.lostMessage()
	switch {
	case o.SpecErr != nil:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterInvalidSpecReason, sentence(o.SpecErr.Error())}
	case lost != "":
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterShardLostReason, lost}
	case o.ReconcileErr != nil:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterReconcileErrorReason, sentence(o.ReconcileErr.Error())}
	case !o.PodsObserved:
		return conditionResult{metav1.ConditionUnknown, cachev1beta1.RedisClusterUnknownReason, "The pass stopped before the pods were observed."}
	case !o.formed():
		reason, msg := progressReason(o)
		if reason == "" {
			reason, msg = cachev1beta1.RedisClusterUnknownReason, "The cluster is not formed yet."
		}
		return conditionResult{metav1.ConditionFalse, reason, msg}
	case t == nil:
		return conditionResult{metav1.ConditionUnknown, cachev1beta1.RedisClusterUnknownReason,
			fmt.Sprintf("Redis was not observed this pass (%d of %d pods ready).", o.Pods.Ready, o.Pods.Expected)}
	case !t.StateOK:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterClusterStateFailReason,
			"cluster_state is fail on some node: the cluster refuses queries."}
	case t.SlotsAssigned < topology.NumSlots:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterSlotsUncoveredReason,
			fmt.Sprintf("Only %d of %d slots have a master the operator can reach; uncovered: %s.",
				t.SlotsAssigned, topology.NumSlots, uncoveredText(o))}
	case len(o.Pods.Overdue) > 0:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterReplicaMissingReason,
			fmt.Sprintf("Pods not ready for more than %s: %s.", podStartGrace, names(o.Pods.Overdue))}
	case len(t.Unreachable) > 0:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterRedisUnreachableReason,
			fmt.Sprintf("Redis does not answer on ready pods: %s.", names(t.Unreachable))}
	}
	if short := unexplainedShortfall(o); len(short) > 0 {
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterReplicaMissingReason,
			fmt.Sprintf("Shards with fewer reachable replicas than the %d of spec: %s.", o.ReplicasPerShard, strings.Join(short, ", "))}
	}
	if len(t.FailedNodes) > 0 {
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterNodeFailedReason,
			fmt.Sprintf("Redis flags nodes as failed: %s.", names(t.FailedNodes))}
	}
	return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterReadyReason,
		"Every slot has a live master; no loss of redundancy observed."}
}

// unexplainedShortfall lists, as "shard (reachable of wanted)", the
// shards owning slots that lack reachable replicas beyond the pods of the
// shard that are still starting (missing, or not ready within
// podStartGrace of their creation: a rolling restart, a new replica).
func unexplainedShortfall(o *observation) []string {
	t := o.Topology
	var out []string
	for _, shard := range slices.Sorted(maps.Keys(t.ReplicasShort)) {
		starting := 0
		for _, p := range o.Pods.NotReady {
			if strings.HasPrefix(p, shard+"-") && !slices.Contains(o.Pods.Overdue, p) {
				starting++
			}
		}
		if short := t.ReplicasShort[shard]; short > starting {
			want := o.ReplicasPerShard
			out = append(out, fmt.Sprintf("%s (%d of %d replicas reachable)", shard, want-short, want))
		}
	}
	return out
}

// scaling reports whether shards are being added or removed: a shard is
// leaving, or slots must move to a desired shard that owns none and that
// status never recorded owning any. A shard of a formed cluster that owned
// slots and owns none now lost its master (or every node): that is no
// scaling, whatever the count of shards owning slots says.
func (o *observation) scaling() bool {
	t := o.Topology
	if len(o.Leaving) > 0 {
		return true
	}
	if t == nil || !t.SlotsToMove {
		return false
	}
	owned := map[string]bool{}
	for _, sh := range o.PreviousShards {
		if len(sh.Slots) > 0 {
			owned[sh.Name] = true
		}
	}
	for _, sh := range t.Shards {
		if len(sh.Slots) == 0 && !owned[sh.Name] {
			return true
		}
	}
	return false
}

// progressReason says what the operator is changing, or "" when nothing.
func progressReason(o *observation) (reason, message string) {
	t := o.Topology
	switch {
	case len(o.StalePods) > 0:
		return cachev1beta1.RedisClusterUpgradingReason,
			fmt.Sprintf("Rolling %s to the new template, replicas first, each master after a planned failover: %s.",
				plural(len(o.StalePods), "pod"), names(o.StalePods))
	case o.Creds.RotationStep != "" && len(o.Pods.NotReady) == 0:
		return cachev1beta1.RedisClusterRotatingCredentialsReason,
			fmt.Sprintf("Rotating the password to version %s without restarts: step %s.", o.Creds.RotationTarget, o.Creds.RotationStep)
	case len(o.Pods.NotReady) > 0 && !(t != nil && o.formed() && o.scaling()):
		// (While shards are added or removed, the new pods starting are
		// part of the scaling: the engine works as soon as they run.)
		return cachev1beta1.RedisClusterPendingReason,
			fmt.Sprintf("%d of %d pods ready; waiting for %s.", o.Pods.Ready, o.Pods.Expected, names(o.Pods.NotReady))
	case !o.formed():
		return cachev1beta1.RedisClusterBootstrappingReason, "All pods are ready; forming the cluster and assigning slots."
	case o.scaling() || (t.Migration != nil && t.Migration.SlotsTotal > 0):
		msg := fmt.Sprintf("Scaling to %d shards (%d own slots now).", o.DesiredShards, t.CurrentShards)
		if m := t.Migration; m != nil && m.SlotsTotal > 0 {
			msg = fmt.Sprintf("Scaling to %d shards (%d own slots now): %d of %d slots moved.", o.DesiredShards, t.CurrentShards, m.SlotsMoved, m.SlotsTotal)
		}
		return cachev1beta1.RedisClusterScalingReason, msg
	case !t.Converged:
		msg := t.Message
		if t.EngineErr != nil {
			msg = t.EngineErr.Error()
		}
		if msg == "" {
			msg = "The topology is converging."
		}
		switch {
		case t.OpenSlots:
			return cachev1beta1.RedisClusterOpenSlotsReason, sentence(msg)
		case t.SlotsAssigned < topology.NumSlots:
			return cachev1beta1.RedisClusterSlotsUncoveredReason, sentence(msg)
		case len(t.Unreachable) > 0:
			return cachev1beta1.RedisClusterRedisUnreachableReason, sentence(msg)
		case len(t.ShortOfReplicas) > 0:
			return cachev1beta1.RedisClusterReplicaMissingReason, sentence(msg)
		case !t.StateOK:
			return cachev1beta1.RedisClusterClusterStateFailReason, sentence(msg)
		default:
			return cachev1beta1.RedisClusterScalingReason, sentence(msg)
		}
	}
	return "", ""
}

// progressingCondition: True while the operator is changing something.
func progressingCondition(rc *cachev1beta1.RedisCluster, o *observation) conditionResult {
	reason, msg := progressReason(o)
	switch {
	case o.SpecErr != nil:
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterInvalidSpecReason, "Nothing can progress until the spec is fixed."}
	case !o.PodsObserved:
		return conditionResult{metav1.ConditionUnknown, cachev1beta1.RedisClusterUnknownReason, "The pass stopped before the pods were observed."}
	case o.lostMessage() != "":
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterShardLostReason,
			"Nothing changes until spec.lostShardPolicy says what to do with the lost slots."}
	case reason == "":
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterReadyReason, "Nothing to change."}
	case rc.Spec.Paused:
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterPausedReason, "Paused; pending: " + msg}
	default:
		return conditionResult{metav1.ConditionTrue, reason, msg}
	}
}

// readyCondition summarises: True only when the spec of this generation is
// fully applied and the cluster serves every slot with full redundancy.
func readyCondition(rc *cachev1beta1.RedisCluster, o *observation, degraded, progressing, creds conditionResult) conditionResult {
	t := o.Topology
	switch {
	case o.SpecErr != nil:
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterInvalidSpecReason, sentence(o.SpecErr.Error())}
	case creds.status == metav1.ConditionFalse:
		return conditionResult{metav1.ConditionFalse, creds.reason, creds.message}
	case degraded.status == metav1.ConditionTrue:
		return conditionResult{metav1.ConditionFalse, degraded.reason, degraded.message}
	case !o.PodsObserved:
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterUnknownReason, "The pass stopped before the pods were observed."}
	case progressing.reason != cachev1beta1.RedisClusterReadyReason && progressing.reason != cachev1beta1.RedisClusterInvalidSpecReason:
		reason, msg := progressReason(o)
		if reason == "" {
			reason, msg = progressing.reason, progressing.message
		}
		return conditionResult{metav1.ConditionFalse, reason, msg}
	case t == nil || !(t.EngineRan || t.Planned) || !t.Converged:
		return conditionResult{metav1.ConditionFalse, cachev1beta1.RedisClusterUnknownReason, "The cluster has not been fully observed yet."}
	default:
		return conditionResult{metav1.ConditionTrue, cachev1beta1.RedisClusterReadyReason,
			fmt.Sprintf("%d shards with %s each serve all %d slots.", rc.Spec.Shards, plural(int(rc.Spec.ReplicasPerShard), "replica"), topology.NumSlots)}
	}
}

// phaseFor maps the Ready condition (and Degraded) to the one-word phase.
func phaseFor(ready, degraded conditionResult) cachev1beta1.Phase {
	switch {
	case ready.reason == cachev1beta1.RedisClusterInvalidSpecReason:
		return cachev1beta1.PhaseFailed
	case degraded.status == metav1.ConditionTrue:
		return cachev1beta1.PhaseDegraded
	case ready.status == metav1.ConditionTrue:
		return cachev1beta1.PhaseReady
	}
	switch ready.reason {
	case cachev1beta1.RedisClusterBootstrappingReason:
		return cachev1beta1.PhaseBootstrapping
	case cachev1beta1.RedisClusterScalingReason:
		return cachev1beta1.PhaseScaling
	case cachev1beta1.RedisClusterUpgradingReason:
		return cachev1beta1.PhaseUpgrading
	}
	return cachev1beta1.PhasePending
}

// applyObservation writes everything the pass observed into rc.Status:
// every owned condition (all six from the first pass), phase, shards,
// counts, migration and credentials. observedGeneration moves only when
// the pass succeeded (no error, no spec error, no lost shard).
// status.health is left to the caller (it folds in the children).
func applyObservation(rc *cachev1beta1.RedisCluster, o *observation, now time.Time, succeeded bool) {
	creds := credentialsCondition(rc, o)
	degraded := degradedCondition(o)
	progressing := progressingCondition(rc, o)
	ready := readyCondition(rc, o, degraded, progressing, creds)

	setCondition(rc, cachev1beta1.RedisClusterPausedCondition, pausedCondition(rc), now)
	setCondition(rc, cachev1beta1.RedisClusterCredentialsReadyCondition, creds, now)
	setCondition(rc, cachev1beta1.RedisClusterSlotsAssignedCondition, slotsCondition(o), now)
	setCondition(rc, cachev1beta1.RedisClusterDegradedCondition, degraded, now)
	setCondition(rc, cachev1beta1.RedisClusterProgressingCondition, progressing, now)
	setCondition(rc, cachev1beta1.RedisClusterReadyCondition, ready, now)
	rc.Status.Phase = phaseFor(ready, degraded)

	rc.Status.ReadyReplicas = int32(o.Pods.Ready)
	rc.Status.Selector = labels.SelectorFromSet(resources.ClusterSelector(rc.Name)).String()
	if t := o.Topology; t != nil {
		rc.Status.Shards = keepLastKnownMasters(t.Shards, o.PreviousShards)
		rc.Status.CurrentShards = int32(t.CurrentShards)
		rc.Status.Migration = t.Migration
		if rc.Status.FormedTime == nil && t.SlotsAssigned == topology.NumSlots {
			rc.Status.FormedTime = &metav1.Time{Time: now}
		}
	} else {
		rc.Status.Migration = nil
	}
	if o.PodsObserved {
		// Remembered until removed (see leaving.go); a pass that stopped
		// before the shards were grouped keeps the list.
		rc.Status.LeavingShards = slices.Clone(o.Leaving)
	}
	rc.Status.MasterPod = ""
	if len(rc.Status.Shards) > 0 {
		rc.Status.MasterPod = rc.Status.Shards[0].MasterPod
	}

	switch {
	case o.Creds.NoAuth:
		rc.Status.Credentials = nil
	case o.Creds.Err == nil:
		if rc.Status.Credentials == nil {
			rc.Status.Credentials = &cachev1beta1.CredentialsStatus{}
		}
		rc.Status.Credentials.Source = o.Creds.Source
		rc.Status.Credentials.Version = o.Creds.Version
	}

	if succeeded && o.SpecErr == nil && o.ReconcileErr == nil && o.lostMessage() == "" {
		rc.Status.ObservedGeneration = rc.Generation
	}
}

// names lists up to five names, then how many more.
func names(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	sorted := slices.Clone(list)
	slices.Sort(sorted)
	if len(sorted) > 5 {
		return strings.Join(sorted[:5], ", ") + fmt.Sprintf(" and %d more", len(sorted)-5)
	}
	return strings.Join(sorted, ", ")
}

// sentence capitalises s and ends it with a period, for condition messages.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// plural writes "1 pod", "2 pods".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
