package topology

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

const (
	// maxRepeats bounds how often the very same actionable steps may be planned in a row.
	maxRepeats = 10
	// maxFailures bounds consecutive failed step batches before Reconcile gives up.
	maxFailures = 5
)

// Reconcile observes every endpoint of desired, repairs what an earlier run or a crash left
// half-done (open slots, half-joined nodes), then plans and executes steps until the cluster
// converges or ctx is done. It is safe to call again at any time, including after a crash at
// any point: every pass starts from a fresh observation.
//
// It follows the Redis Cluster specification: nodes join through "Node handshake" (CLUSTER
// MEET; a node restarted on a new address is met again, never reset), slots move as in "Live
// resharding" (SETSLOT IMPORTING, MIGRATING, MIGRATE, SETSLOT NODE), failed masters are left
// to "Replica election and promotion" before their IDs are forgotten as in "Removing nodes
// from a cluster", and replicas are attached to their shard's master before it receives
// slots, so that "Replica migration" has no orphaned master to fix.
//
// It returns when the cluster converged (nil error); when convergence is blocked by
// something outside Redis (ErrNotReady: nodes unreachable or missing; ErrShardLost;
// ErrConflict; ErrAuth); when steps keep failing or a move meets a key conflict
// (ErrKeyConflict); or when ctx is done (ctx.Err()). While Redis converges by itself
// (gossip, failover, replica sync) it polls. The Result is non-nil
// whenever the endpoints could be observed. Migrations stop promptly and cleanly on cancel
// (between MIGRATE chunks of bounded size): each slot in flight is finished or rolled back,
// none is left open. A key found on both ends of a move with different values stops it at
// once with ErrKeyConflict.
func (e *Engine) Reconcile(ctx context.Context, desired Desired, progress func(Progress)) (*Result, error) {
	if err := desired.Validate(); err != nil {
		return nil, err
	}
	c := e.newConns()
	defer c.close()
	tr := &tracker{cb: progress}
	var (
		lastSig  string
		repeats  int
		failures int
		res      *Result
		// waitingSince is when the observation that began the current run of
		// Wait-only plans started; lastWait is the reason last logged, so a
		// wait is logged once, not every poll.
		waitingSince time.Time
		lastWait     string
		// acted: steps ran since the last observation, so res is stale.
		acted bool
	)
	for {
		observedAt := time.Now()
		view, err := e.observe(ctx, c, desired.endpoints())
		if err != nil {
			// Cancelled while observing: after a run of waits the last
			// result still says what the cluster looks like, and observing
			// once more would cost another round of dial timeouts for the
			// nodes that do not answer.
			if acted || res == nil {
				return e.finalResult(c, desired, res), err
			}
			return res, waitEnded(err, lastWait)
		}
		acted = false
		p, steps, perr := plan(view, desired)
		res = buildResult(p, steps, perr)
		if auth := view.authErrors(); len(auth) > 0 {
			return res, errors.Join(auth...)
		}
		var actionable []Step
		waitReason := ""
		for _, s := range steps {
			if s.Kind == StepWait {
				waitReason = s.Reason
				continue
			}
			actionable = append(actionable, s)
		}
		if len(actionable) == 0 {
			if perr != nil || len(steps) == 0 {
				if perr == nil {
					e.log.V(1).Info("Cluster converged")
				}
				return res, perr
			}
			// The observation that found the wait counts towards the budget: one
			// that dialled a node whose address swallows packets (a lost Kubernetes
			// node) took the dial timeout, and the status waits for this pass.
			if waitingSince.IsZero() {
				waitingSince = observedAt
			}
			if b := e.opts.WaitBudget; b > 0 && time.Since(waitingSince) >= b {
				return res, fmt.Errorf("%w: %s", ErrNotReady, waitReason)
			}
			tr.update(func(p *Progress) { p.Step, p.Observed = "Wait: "+waitReason, res })
			if waitReason != lastWait {
				e.log.V(1).Info("Waiting for Redis", "reason", waitReason)
				lastWait = waitReason
			}
			if err := sleep(ctx, e.opts.PollInterval); err != nil {
				return res, waitEnded(err, lastWait)
			}
			continue
		}
		waitingSince, lastWait = time.Time{}, ""
		sig := signature(actionable)
		if sig == lastSig {
			repeats++
		} else {
			lastSig, repeats = sig, 0
		}
		if repeats >= maxRepeats {
			return res, fmt.Errorf("%w: planned %d times in a row: %s", ErrNoProgress, repeats+1, sig)
		}
		acted = true
		if err := e.execute(ctx, c, view, actionable, tr); err != nil {
			if ctx.Err() != nil {
				return e.finalResult(c, desired, res), ctx.Err()
			}
			failures++
			e.log.Info("Steps failed; observing again", "attempt", failures, "error", err.Error())
			if failures >= maxFailures || errors.Is(err, ErrKeyConflict) {
				return res, err
			}
			// Back off (0.2 s, 0.4 s, 0.8 s, …): a node may be restarting or loading.
			if err := sleep(ctx, e.opts.PollInterval<<failures); err != nil {
				return e.finalResult(c, desired, res), err
			}
			continue
		}
		failures = 0
	}
}

// waitEnded is the error of a Reconcile whose deadline ended a run of waits: ErrNotReady
// with what it waited for, as when the wait budget runs out, since nothing is half done.
// Any other error (a cancellation: the operator stops) is returned as it is.
func waitEnded(err error, waitReason string) error {
	if errors.Is(err, context.DeadlineExceeded) && waitReason != "" {
		return fmt.Errorf("%w: %s", ErrNotReady, waitReason)
	}
	return err
}

// finalResult observes once more, outside ctx, so that a cancelled Reconcile still reports
// the state it left; it falls back to the last result.
func (e *Engine) finalResult(c *conns, desired Desired, last *Result) *Result {
	ctx, cancel := context.WithTimeout(context.Background(), 2*e.opts.CommandTimeout)
	defer cancel()
	view, err := e.observe(ctx, c, desired.endpoints())
	if err != nil {
		return last
	}
	p, steps, perr := plan(view, desired)
	return buildResult(p, steps, perr)
}

func signature(steps []Step) string {
	parts := make([]string, len(steps))
	for i, s := range steps {
		parts[i] = s.String()
	}
	return strings.Join(parts, "; ")
}

// plan is Plan returning the planner too, for the Result.
func plan(view *ClusterView, desired Desired) (*planner, []Step, error) {
	p := &planner{assessment: assess(view, desired)}
	steps, err := p.plan()
	return p, steps, err
}

func buildResult(p *planner, steps []Step, perr error) *Result {
	res := &Result{
		View:      p.view,
		Converged: len(steps) == 0 && perr == nil,
		Settled:   p.settled(steps),
		Removable: p.removable(),
	}
	if res.Settled {
		res.WaitingFor = p.waitingFor
	}
	if errors.Is(perr, ErrShardLost) {
		res.DataLoss = p.lost
	}
	res.Shards = p.shardStatuses()
	switch {
	case res.Converged:
		res.Message = fmt.Sprintf("Cluster converged: %d shards with %d replicas each own all %d slots", len(p.shards), p.desired.ReplicasPerShard, NumSlots)
	case len(steps) > 0 && steps[0].Kind == StepWait:
		res.Message = "Waiting: " + steps[0].Reason
	case len(steps) > 0:
		res.Message = fmt.Sprintf("Next: %s (%s)", steps[0], steps[0].Reason)
	case perr != nil:
		res.Message = firstLine(perr.Error())
	}
	sort.Strings(res.Removable)
	return res
}

// Shards is the per-shard summary Reconcile reports in Result.Shards, for a view it did not
// act on: one ShardStatus per desired shard, in order. A shard's master is the one the
// planner acts on: of the slot owners mapped to the shard, the one owning most slots, where a
// slot's owner is the reachable master that claims it, else the node most reachable nodes'
// tables name (it may be unreachable: then MasterName is empty); for a shard owning none, a
// reachable master that owns no slot and has none open (a candidate; the first in endpoint
// order unless another spreads the masters better over zones and nodes). Its replicas are
// the shard's reachable nodes that follow that master; its slots are those the master owns.
// nil for a nil view.
func Shards(view *ClusterView, desired Desired) []ShardStatus {
	if view == nil {
		return nil
	}
	return assess(view, desired).shardStatuses()
}

// shardStatuses summarises the desired shards (see Shards).
func (a *assessment) shardStatuses() []ShardStatus {
	var out []ShardStatus
	for _, sh := range a.shards {
		st := ShardStatus{Name: sh.spec.Name, MasterNodeID: sh.masterID}
		if sh.master != nil {
			st.MasterName = sh.master.Endpoint.Name
		}
		for _, n := range sh.nodes {
			if n.Reachable() && sh.masterID != "" && n.MasterID() == sh.masterID {
				st.ReplicaNames = append(st.ReplicaNames, n.Endpoint.Name)
			}
		}
		if sh.masterID != "" {
			owned := a.ownedBy(sh.masterID)
			st.SlotCount = len(owned)
			for _, r := range RangesOf(owned) {
				st.SlotRanges = append(st.SlotRanges, r.String())
			}
		}
		out = append(out, st)
	}
	return out
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
