package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/status"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// migrationStatusInterval is how often a long Reconcile call writes its
// progress into status.migration.
const migrationStatusInterval = 10 * time.Second

// reconcileTopology talks to Redis. Unless the cluster is paused, the
// engine's Reconcile drives the cluster to spec (bounded by PassBudget;
// a longer migration continues next pass) with the pods that are up
// (running on an IP; Up, not Ready: readiness of a replica needs its
// master link, which after a restart on new IPs needs the engine's MEET).
// The others are Down endpoints (see shardPods.spec): only the steps that
// need them wait, and status names them. Paused, the pods that are up are
// only observed, for status.
func (r *RedisClusterReconciler) reconcileTopology(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if !s.passwordKnown {
		return ctrl.Result{}, false, nil
	}
	var up []topology.Endpoint
	for _, sh := range s.shards {
		for _, p := range sh.Pods {
			if p.Up {
				up = append(up, p.endpoint())
			}
		}
	}
	if len(up) == 0 {
		return ctrl.Result{}, false, nil
	}
	if !s.obs.FormedBefore {
		fresh, err := r.freshVolumes(ctx, s)
		if err != nil {
			return ctrl.Result{}, true, err
		}
		s.obs.Fresh = fresh
	}
	eng := r.engine(s, s.password)
	desired := s.desired()

	if s.rc.Spec.Paused {
		octx, cancel := context.WithTimeout(ctx, 2*r.RedisTimeout)
		defer cancel()
		view, err := eng.Observe(octx, up)
		if err != nil {
			return ctrl.Result{}, false, fmt.Errorf("observing Redis: %w", err)
		}
		s.view = view
		t := status.Summarize(view, desired, nil)
		// What the engine would do, without doing it: a paused cluster that
		// needs nothing is converged, not "converging". (With pods down
		// the planner reports them and this stays false.)
		steps, perr := topology.Plan(view, desired)
		t.Converged, t.Planned = len(steps) == 0 && perr == nil, true
		s.obs.Topology = t
		return ctrl.Result{}, false, nil
	}

	r.announceWork(ctx, s, eng, up, desired)
	tctx, cancel := context.WithTimeout(ctx, r.PassBudget)
	defer cancel()
	prog := &progressReporter{r: r, s: s, ctx: ctx, desired: desired, before: s.rc.Status.Migration.DeepCopy()}
	res, err := eng.Reconcile(tctx, desired, prog.report)
	s.result = res
	if res != nil {
		s.view = res.View
	}
	t := status.Summarize(s.view, desired, res)
	t.EngineRan = true
	t.Migration = prog.migration()
	s.obs.Topology = t
	prog.flushEvents()

	switch {
	case err == nil:
		// Masters are spread only once the cluster has been Ready for
		// spreadSettle (scope.desired): look again then.
		if left := s.settleLeft(); left > 0 && !s.movingMasters() {
			return ctrl.Result{RequeueAfter: left}, false, nil
		}
		return ctrl.Result{}, false, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		// A long migration: the engine finished its round cleanly; go on soon.
		t.EngineErr = fmt.Errorf("topology work continues: %s", t.Message)
		return ctrl.Result{RequeueAfter: stepRequeue}, false, nil
	case errors.Is(err, topology.ErrNotReady):
		t.EngineErr = err
		return ctrl.Result{RequeueAfter: busyRequeue}, false, nil
	case errors.Is(err, topology.ErrShardLost):
		// Reported through status (ShardLost); retrying cannot help until a
		// person sets spec.lostShardPolicy (which wakes the controller) or
		// the nodes come back: look again, less and less often.
		return ctrl.Result{RequeueAfter: r.stuckRequeue(s, cachev1beta1.RedisClusterShardLostReason)}, false, nil
	case errors.Is(err, topology.ErrConflict), errors.Is(err, topology.ErrKeyConflict):
		// Retrying at once cannot fix this either (nodes hold a topology the
		// engine refuses to change, or a key whose two copies differ in a
		// slot being moved): Degraded says what is wrong (ReconcileError),
		// without an error return (no error log per retry), and the pass
		// looks again less and less often.
		s.obs.ReconcileErr = fmt.Errorf("topology: %w", err)
		if errors.Is(err, topology.ErrKeyConflict) {
			s.obs.ReconcileErr = fmt.Errorf("topology: %w; delete the copy that is wrong (on either node named) and the next pass finishes the move", err)
		}
		return ctrl.Result{RequeueAfter: r.stuckRequeue(s, cachev1beta1.RedisClusterReconcileErrorReason)}, true, nil
	default:
		s.obs.ReconcileErr = fmt.Errorf("topology: %w", err)
		return ctrl.Result{}, true, s.obs.ReconcileErr
	}
}

// announceWork writes the status before an engine run that forms the
// cluster or changes its shard count, so that status says Bootstrapping or
// Scaling while the run meets nodes and moves slots, rather than what the
// last pass saw (typically PodsPending) until the run ends, which for a
// scale-out can take minutes. It observes Redis once and writes only when
// that observation says bootstrapping or scaling; a settled cluster is
// neither observed twice nor written. Failures are left to the run.
func (r *RedisClusterReconciler) announceWork(ctx context.Context, s *scope, eng *topology.Engine, ready []topology.Endpoint, desired topology.Desired) {
	// A lost shard is no work ahead: it waits for a person.
	if !shardCountChanging(s.rc, &s.obs) || s.obs.LostBefore != "" {
		return
	}
	octx, cancel := context.WithTimeout(ctx, 2*r.RedisTimeout)
	view, err := eng.Observe(octx, ready)
	cancel()
	if err != nil {
		return
	}
	t := status.Summarize(view, desired, nil)
	s.obs.Topology = t
	if _, perr := topology.Plan(view, desired); errors.Is(perr, topology.ErrShardLost) {
		s.obs.Topology = nil
		return
	}
	// Only a cluster not formed yet or one whose shards change: a stale
	// count (masters unreachable in the last pass) is no work ahead, and
	// "converging" without an engine result says nothing true.
	bootstrapping := !s.obs.Formed()
	scaling := s.obs.Scaling()
	if len(s.obs.StalePods) > 0 || (!bootstrapping && !scaling) {
		s.obs.Topology = nil
		return
	}
	if err := r.writeEarly(ctx, s); err != nil {
		s.log.Info("Cannot write the status before the topology work", "error", err.Error())
		return
	}
	// The events are out and the written status is the new base.
	s.events = nil
	s.original = s.rc.DeepCopy()
}

// writeEarly writes the status in the middle of a pass (announceWork,
// reportFault). When the write fails, s.rc.Status is put back as it was:
// patchStatus computed the conditions into it, and the pass's final write
// would otherwise diff against a transition that was never stored (a Ready
// lastTransitionTime moved to this pass with Ready True throughout).
func (r *RedisClusterReconciler) writeEarly(ctx context.Context, s *scope) error {
	before := s.rc.Status.DeepCopy()
	if err := r.writeStatus(ctx, s, nil, false); err != nil {
		s.rc.Status = *before
		return err
	}
	return nil
}

// stuckRequeue is when a pass that found the cluster stuck for a reason
// only a person can fix (Degraded with that reason) looks again: as long
// after as Degraded has been True with it, between busyRequeue and
// ResyncPeriod, so the wait doubles from pass to pass.
func (r *RedisClusterReconciler) stuckRequeue(s *scope, reason string) time.Duration {
	since := s.now
	if c := meta.FindStatusCondition(s.original.Status.Conditions, cachev1beta1.RedisClusterDegradedCondition); c != nil &&
		c.Reason == reason && c.Status == metav1.ConditionTrue {
		since = c.LastTransitionTime.Time
	}
	return min(max(s.now.Sub(since), busyRequeue), max(r.ResyncPeriod, busyRequeue))
}

// shardCountChanging reports whether the last status counted a different
// number of shards owning slots than spec asks for (none before the
// cluster is formed), or shards are leaving.
func shardCountChanging(rc *cachev1beta1.RedisCluster, o *status.Observation) bool {
	return rc.Status.CurrentShards != rc.Spec.Shards || len(o.Leaving) > 0
}

// progressReporter turns the engine's progress callbacks into
// status.migration (written every migrationStatusInterval during a long
// call), a status written early when the engine waits on a fault (see
// reportFault) and, at the end of the call, one event listing its steps.
type progressReporter struct {
	r       *RedisClusterReconciler
	s       *scope
	ctx     context.Context
	desired topology.Desired
	// faultWritten: reportFault wrote (or tried to write) this pass's
	// status already.
	faultWritten bool
	// before is status.migration as the previous pass left it: a migration
	// spans many passes (each bounded by PassBudget), and the status counts
	// from its start, not from this pass's.
	before *cachev1beta1.MigrationStatus
	last   topology.Progress
	steps  []string
	wrote  time.Time
}

func (p *progressReporter) report(pr topology.Progress) {
	p.last = pr
	if pr.Step != "" && !slices.Contains(p.steps, pr.Step) && !isWaitStep(pr.Step) {
		p.steps = append(p.steps, pr.Step)
	}
	if pr.SlotsTotal > 0 && time.Since(p.wrote) >= migrationStatusInterval {
		p.wrote = time.Now()
		p.writeMigration()
	}
	if res := pr.Observed; res != nil && !p.faultWritten &&
		meta.IsStatusConditionTrue(p.s.original.Status.Conditions, cachev1beta1.RedisClusterReadyCondition) {
		// What this pass reports if the wait budget runs out now
		// (reconcileTopology's ErrNotReady case).
		t := status.Summarize(res.View, p.desired, res)
		t.EngineRan = true
		t.EngineErr = fmt.Errorf("%w: %s", topology.ErrNotReady, strings.TrimPrefix(pr.Step, "Wait: "))
		t.Migration = p.migration()
		p.reportFault(t)
	}
}

// reportFault writes the status at once, before the engine call ends, when
// the engine waits on Redis while the status written last says Ready and
// the wait's observation t makes the cluster Degraded or finds pods not
// ready: a master that does not answer and whose failover Redis decides,
// every pod deleted. The pass's own write comes when the wait ends, up to
// the engine's wait budget later, and meanwhile a Ready with no pod up is
// not the truth. A wait that is not a fault (gossip agreeing on a new
// epoch, a replica syncing) writes nothing. A fault that heals within the
// wait (a master's container restarting in under 5 s) is reported, and
// Ready again at the pass's end: it happened. At most one write per pass,
// bounded by RedisTimeout; the written status is the pass's base after.
func (p *progressReporter) reportFault(t *status.Topology) {
	s := p.s
	before := s.obs.Topology
	s.obs.Topology = t
	probe := s.rc.DeepCopy()
	status.Apply(probe, &s.obs, s.now, false)
	if !meta.IsStatusConditionTrue(probe.Status.Conditions, cachev1beta1.RedisClusterDegradedCondition) && len(s.obs.Pods.NotReady) == 0 {
		s.obs.Topology = before
		return
	}
	p.faultWritten = true
	ctx, cancel := context.WithTimeout(p.ctx, p.r.RedisTimeout)
	defer cancel()
	if err := p.r.writeEarly(ctx, s); err != nil {
		s.log.Info("Cannot write the status while the engine waits", "error", err.Error())
		return
	}
	s.log.V(1).Info("Wrote the status while the engine waits", "phase", s.rc.Status.Phase)
	// The events are out and the written status is the new base.
	s.events = nil
	s.original = s.rc.DeepCopy()
}

func isWaitStep(step string) bool { return len(step) >= 4 && step[:4] == "Wait" }

func (p *progressReporter) migration() *cachev1beta1.MigrationStatus {
	if p.last.SlotsTotal == 0 {
		return nil
	}
	m := &cachev1beta1.MigrationStatus{
		SlotsMoved: int32(p.last.SlotsMoved),
		SlotsTotal: int32(p.last.SlotsTotal),
		KeysMoved:  p.last.KeysMoved,
	}
	// This pass continues the previous pass's unfinished migration: what it
	// moved counts too, and its total was that many slots larger.
	if b := p.before; b != nil && b.SlotsMoved < b.SlotsTotal {
		m.SlotsMoved += b.SlotsMoved
		m.SlotsTotal += b.SlotsMoved
		m.KeysMoved += b.KeysMoved
	}
	return m
}

// writeMigration patches status.migration alone while the engine works.
func (p *progressReporter) writeMigration() {
	rc := p.s.rc
	base := rc.DeepCopy()
	patched := rc.DeepCopy()
	patched.Status.Migration = p.migration()
	ctx, cancel := context.WithTimeout(p.ctx, p.r.RedisTimeout)
	defer cancel()
	if err := p.r.Client.Status().Patch(ctx, patched, client.MergeFrom(base)); err != nil {
		p.s.log.Info("Cannot write migration progress", "error", err.Error())
		return
	}
	// The written progress is part of the pass's base now: the final status
	// write is guarded by this resourceVersion and diffs against this value.
	// (The engine calls report one at a time, while the pass waits for it.)
	rc.ResourceVersion = patched.ResourceVersion
	p.r.written.remember(patched)
	p.s.original.ResourceVersion = patched.ResourceVersion
	p.s.original.Status.Migration = patched.Status.Migration.DeepCopy()
}

// flushEvents records one event for the engine call's actions (none when
// it only observed or waited): the runs of steps in order, at most
// maxStepsInEvent of them, and the migration's totals. One event per call
// keeps a long scale-out from exhausting the event rate limit of the
// object, so the events of every later action still get through.
func (p *progressReporter) flushEvents() {
	if len(p.steps) == 0 {
		return
	}
	shown := p.steps
	more := ""
	if len(shown) > maxStepsInEvent {
		more = fmt.Sprintf("; and %d more", len(shown)-maxStepsInEvent)
		shown = shown[:maxStepsInEvent]
	}
	msg := strings.Join(shown, "; ") + more
	if m := p.migration(); m != nil {
		msg = fmt.Sprintf("%s (moved %d of %d slots, %d keys)", msg, m.SlotsMoved, m.SlotsTotal, m.KeysMoved)
	}
	p.s.did("Topology", "%s", msg)
}

// maxStepsInEvent bounds the step runs one Topology event lists.
const maxStepsInEvent = 8
