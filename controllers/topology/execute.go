package topology

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// tracker accumulates Progress across the steps of one Reconcile call and reports it.
type tracker struct {
	mu sync.Mutex
	cb func(Progress)
	p  Progress
}

func (t *tracker) update(f func(p *Progress)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.p)
	if t.cb != nil {
		t.cb(t.p)
	}
	t.p.Observed = nil // one report's
}

// execute runs the actionable steps of one plan: runs of consecutive steps of one kind run
// concurrently (migrations through the pair scheduler); the first failing run stops it.
func (e *Engine) execute(ctx context.Context, c *conns, view *ClusterView, steps []Step, tr *tracker) error {
	for len(steps) > 0 {
		n := 1
		for n < len(steps) && steps[n].Kind == steps[0].Kind {
			n++
		}
		run := steps[:n]
		steps = steps[n:]
		tr.update(func(p *Progress) { p.Step = describeRun(run) })
		var err error
		if run[0].Kind == StepMigrate {
			err = e.runMoves(ctx, c, view, run, tr)
		} else {
			err = e.runConcurrently(ctx, c, view, run)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func describeRun(run []Step) string {
	if len(run) == 1 {
		return run[0].String()
	}
	return fmt.Sprintf("%d×%s (%s, …)", len(run), run[0].Kind, run[0])
}

func (e *Engine) runConcurrently(ctx context.Context, c *conns, view *ClusterView, run []Step) error {
	errs := make([]error, len(run))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i, s := range run {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := e.runStep(ctx, c, view, s); err != nil {
				errs[i] = fmt.Errorf("%s: %w", s, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// node resolves an endpoint name of the view to its reachable NodeView.
func node(view *ClusterView, name string) (*NodeView, error) {
	n := view.Node(name)
	if n == nil {
		return nil, fmt.Errorf("%w: unknown endpoint %s", ErrNotReady, name)
	}
	if !n.Reachable() {
		return nil, fmt.Errorf("%w: %s unreachable: %v", ErrNotReady, name, n.Err)
	}
	return n, nil
}

func (e *Engine) runStep(ctx context.Context, c *conns, view *ClusterView, s Step) error {
	n, err := node(view, s.Node)
	if s.Kind != StepForget && err != nil {
		return err
	}
	log := e.log.WithValues("step", string(s.Kind))
	switch s.Kind {
	case StepAddSlots, StepReclaim:
		args := []any{"CLUSTER", "ADDSLOTSRANGE"}
		for _, r := range s.Slots {
			args = append(args, r.Start, r.End)
		}
		// A reclaimed slot's keys are on its owner, n; keys on any other master stop both.
		var owner *NodeView
		msg := "Assigning slots"
		if s.Kind == StepReclaim {
			owner, msg = n, "Reclaiming slots the other nodes say this master owns"
		}
		if err := e.checkNoKeys(ctx, c, view, s.Slots, owner); err != nil {
			return err
		}
		log.Info(msg, "node", s.Node, "slots", FormatRanges(s.Slots))
		return e.do(ctx, c, n, args...)
	case StepSetEpoch:
		log.V(1).Info("Setting config epoch", "node", s.Node, "epoch", s.Epoch)
		if err := e.do(ctx, c, n, "CLUSTER", "SET-CONFIG-EPOCH", s.Epoch); err != nil {
			// Refused once the node knows others: the epoch collision algorithm then makes
			// epochs distinct by itself, so this is not an error.
			log.V(1).Info("Config epoch not set", "node", s.Node, "reason", err.Error())
		}
		return nil
	case StepTellOwner:
		log.V(1).Info("Telling a new master the owner of slots", "node", s.Node, "owner", s.NodeID, "slots", FormatRanges(s.Slots))
		cctx, cancel := e.cmdCtx(ctx)
		defer cancel()
		pipe := c.get(n.Endpoint.Addr).Pipeline()
		for _, slot := range expand(s.Slots) {
			pipe.Do(cctx, "CLUSTER", "SETSLOT", slot, "NODE", s.NodeID)
		}
		if _, err := pipe.Exec(cctx); err != nil {
			log.V(1).Info("New master not told the owner of slots; gossip will", "node", s.Node, "reason", err.Error())
		}
		return nil
	case StepMeet:
		t, err := node(view, s.Target)
		if err != nil {
			return err
		}
		host, port, _ := net.SplitHostPort(t.Endpoint.Addr)
		args := []any{"CLUSTER", "MEET", host, port}
		if self := t.Self(); self != nil && self.BusPort != 0 {
			args = append(args, self.BusPort)
		}
		log.Info("Meeting node", "node", s.Node, "target", s.Target, "addr", t.Endpoint.Addr)
		return e.do(ctx, c, n, args...)
	case StepReplicate:
		log.Info("Attaching replica", "node", s.Node, "masterID", s.NodeID)
		return e.do(ctx, c, n, "CLUSTER", "REPLICATE", s.NodeID)
	case StepForget:
		return e.forget(ctx, c, view, s)
	case StepFailover:
		if s.Option == "" {
			return e.spreadMaster(ctx, c, view, n, s)
		}
		args := []any{"CLUSTER", "FAILOVER"}
		if s.Option != "" {
			args = append(args, s.Option)
		}
		log.Info("Promoting replica", "node", s.Node, "option", s.Option, "reason", s.Reason)
		return e.do(ctx, c, n, args...)
	case StepStabilize:
		return e.stabilize(ctx, c, view, n, s)
	case StepWait:
		return sleep(ctx, e.opts.PollInterval)
	default:
		return fmt.Errorf("%w: step kind %q", ErrInvalidDesired, s.Kind)
	}
}

// checkNoKeys refuses to assign slots in which some master other than owner (nil: any
// master) still holds keys (redis-cli --cluster fix would give such a slot to that node;
// the engine leaves it to a human).
func (e *Engine) checkNoKeys(ctx context.Context, c *conns, view *ClusterView, slots []SlotRange, owner *NodeView) error {
	for _, n := range view.Nodes {
		if n == owner || !n.Reachable() || n.Keys == 0 || !n.IsMaster() {
			continue
		}
		cctx, cancel := e.cmdCtx(ctx)
		pipe := c.get(n.Endpoint.Addr).Pipeline()
		all := expand(slots)
		counts := make([]*redis.IntCmd, len(all))
		for i, sl := range all {
			counts[i] = pipe.ClusterCountKeysInSlot(cctx, sl)
		}
		err := execPipe(cctx, pipe, n.Endpoint.Name)
		cancel()
		if err != nil {
			return err
		}
		for i, cnt := range counts {
			if cnt.Val() > 0 {
				return fmt.Errorf("%w: %s holds %d keys in unowned slot %d; not assigning it", ErrConflict, n.Endpoint.Name, cnt.Val(), all[i])
			}
		}
	}
	return nil
}

func (e *Engine) do(ctx context.Context, c *conns, n *NodeView, args ...any) error {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	return classify(c.get(n.Endpoint.Addr).Do(cctx, args...).Err())
}

// forget sends CLUSTER FORGET to every node of s.On concurrently, so that all of them drop
// the node within the 60 s ban window (spec: "Removing nodes from a cluster"). As a last
// safety net every node's own table is read first, and when any of them still records the
// node as owning slots (a replica that has not heard of the last slots' move yet, say) no
// node forgets it: forgetting on some nodes only would leave the others linked to a node
// the rest of the cluster no longer knows. A lost shard's accepted data loss skips the check.
func (e *Engine) forget(ctx context.Context, c *conns, view *ClusterView, s Step) error {
	nodes := make([]*NodeView, len(s.On))
	for i, name := range s.On {
		n, err := node(view, name)
		if err != nil {
			return err
		}
		nodes[i] = n
	}
	if s.Option != ForgetDataLoss {
		if err := eachNode(nodes, func(n *NodeView) error { return e.forgettable(ctx, c, n, s.NodeID) }); err != nil {
			return err
		}
	}
	return eachNode(nodes, func(n *NodeView) error {
		cctx, cancel := e.cmdCtx(ctx)
		defer cancel()
		e.log.Info("Forgetting node", "node", n.Endpoint.Name, "nodeID", s.NodeID, "reason", s.Reason)
		err := c.get(n.Endpoint.Addr).Do(cctx, "CLUSTER", "FORGET", s.NodeID).Err()
		if err != nil && strings.Contains(err.Error(), "Unknown node") {
			err = nil // already forgotten
		}
		if err != nil {
			return fmt.Errorf("%s: %w", n.Endpoint.Name, classify(err))
		}
		return nil
	})
}

// forgettable reads n's own CLUSTER NODES and returns an ErrConflict error when it records
// the node id as the owner of slots.
func (e *Engine) forgettable(ctx context.Context, c *conns, n *NodeView, id string) error {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	text, err := c.get(n.Endpoint.Addr).ClusterNodes(cctx).Result()
	if err != nil {
		return fmt.Errorf("%s: %w", n.Endpoint.Name, classify(err))
	}
	recs, err := ParseClusterNodes(text)
	if err != nil {
		return fmt.Errorf("%s: %w", n.Endpoint.Name, err)
	}
	for _, r := range recs {
		if r.ID == id && len(r.Slots) > 0 {
			return fmt.Errorf("%w: %s still records node %s as owner of %s; not forgetting it",
				ErrConflict, n.Endpoint.Name, id, FormatRanges(r.Slots))
		}
	}
	return nil
}

// eachNode runs f for every node concurrently and joins their errors.
func eachNode(nodes []*NodeView, f func(*NodeView) error) error {
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(n)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stabilize moves n's keys in s.Slots to s.Target (when set) and clears the slots' open
// state with CLUSTER SETSLOT STABLE. It runs to its end even when ctx is cancelled (each
// command keeps its own timeout), so a repair is never left half-done.
func (e *Engine) stabilize(ctx context.Context, c *conns, view *ClusterView, n *NodeView, s Step) error {
	ctx = context.WithoutCancel(ctx)
	slots := expand(s.Slots)
	if s.Target != "" {
		t, err := node(view, s.Target)
		if err != nil {
			return err
		}
		if err := e.bindUnbound(ctx, c, n, t, slots); err != nil {
			return err
		}
		if _, err := e.drainKeys(ctx, c, n, t, slots, nil, newChunkSizer(migratePace{roundBytes: e.opts.MigrateRoundBytes}, e.opts.MigrateBatchBytes, e.opts.MigrateRoundBytes)); err != nil {
			return err
		}
	}
	e.log.Info("Closing open slots", "node", n.Endpoint.Name, "slots", FormatRanges(s.Slots), "keysTo", s.Target)
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	pipe := c.get(n.Endpoint.Addr).Pipeline()
	for _, sl := range slots {
		pipe.Do(cctx, "CLUSTER", "SETSLOT", sl, "STABLE")
	}
	_, err := pipe.Exec(cctx)
	return classify(err)
}

// bindUnbound gives the slots that n's own table leaves without an owner to t (CLUSTER
// SETSLOT <slot> NODE <t>) before n's keys in them move to t. A node importing a slot keeps
// it unbound once the slot's old owner turned into a replica: Redis drops that owner's slots
// on its role change and, while importing, ignores the new owner's claim
// (clusterUpdateSlotsConfigWith skips importing slots), so the node reports cluster_state:fail
// and refuses MIGRATE of the slot's keys with "CLUSTERDOWN Hash slot not served" for good
// (seen with redis-server 7.0.15 a few seconds after the source of a half-moved slot failed
// over). Binding the slot to the owner that every other node agrees on, which gossip would
// do but for the import, leaves the import flag in place (SETSLOT NODE clears it only when
// the node names itself) and lets the keys move.
func (e *Engine) bindUnbound(ctx context.Context, c *conns, n, t *NodeView, slots []int) error {
	var unbound []int
	for _, sl := range slots {
		bound := false
		for _, r := range n.Known {
			for _, sr := range r.Slots {
				bound = bound || sr.Start <= sl && sl <= sr.End
			}
		}
		if !bound {
			unbound = append(unbound, sl)
		}
	}
	if len(unbound) == 0 {
		return nil
	}
	e.log.Info("Binding unbound slots to their owner before moving their keys", "node", n.Endpoint.Name,
		"slots", FormatRanges(RangesOf(unbound)), "owner", t.Endpoint.Name)
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	pipe := c.get(n.Endpoint.Addr).Pipeline()
	for _, sl := range unbound {
		pipe.Do(cctx, "CLUSTER", "SETSLOT", sl, "NODE", t.ID)
	}
	_, err := pipe.Exec(cctx)
	return classify(err)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// runMoves runs migrations concurrently, at most pace.parallel at a time. A node is the
// source of one running move at most and never a source and a target at once; several moves
// may share a target, so a scale-out that fills one new master from every other master runs
// those moves side by side (each slot keeps its own MIGRATING/IMPORTING pair, and a master
// may import several slots from different sources at once: CLUSTER SETSLOT docs). When a
// node the moves touch serves clients, they run at the serving pace instead (Engine.pace).
func (e *Engine) runMoves(ctx context.Context, c *conns, view *ClusterView, moves []Step, tr *tracker) error {
	total := 0
	for _, m := range moves {
		total += countRanges(m.Slots)
	}
	tr.update(func(p *Progress) { p.SlotsTotal += total })
	serving := e.servingClients(ctx, c, view, moves)
	pace := e.pace(serving)
	if len(serving) > 0 {
		e.log.Info("Moving slots at the serving pace: nodes serve clients", "nodes", serving)
	}
	var (
		mu      sync.Mutex
		cond    = sync.NewCond(&mu)
		sources = map[string]bool{}
		targets = map[string]int{}
		running int
		errs    []error
		pending = append([]Step(nil), moves...)
	)
	mu.Lock()
	for {
		if len(errs) > 0 || ctx.Err() != nil {
			pending = nil
		}
		if len(pending) == 0 && running == 0 {
			break
		}
		idx := -1
		if running < pace.parallel {
			for i, m := range pending {
				if !sources[m.Node] && targets[m.Node] == 0 && !sources[m.Target] {
					idx = i
					break
				}
			}
		}
		if idx < 0 {
			cond.Wait()
			continue
		}
		m := pending[idx]
		pending = append(pending[:idx:idx], pending[idx+1:]...)
		sources[m.Node] = true
		targets[m.Target]++
		running++
		go func() {
			err := e.moveStep(ctx, c, view, m, pace, tr)
			mu.Lock()
			defer mu.Unlock()
			delete(sources, m.Node)
			if targets[m.Target]--; targets[m.Target] == 0 {
				delete(targets, m.Target)
			}
			running--
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", m, err))
			}
			cond.Broadcast()
		}()
	}
	mu.Unlock()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

func (e *Engine) moveStep(ctx context.Context, c *conns, view *ClusterView, m Step, pace migratePace, tr *tracker) error {
	src, err := node(view, m.Node)
	if err != nil {
		return err
	}
	dst, err := node(view, m.Target)
	if err != nil {
		return err
	}
	var others []*NodeView
	for _, n := range view.Nodes {
		if n.Reachable() && n.IsMaster() && n != src && n != dst && n.OwnSlots().Len() > 0 {
			others = append(others, n)
		}
	}
	e.log.Info("Migrating slots", "from", src.Endpoint.Name, "to", dst.Endpoint.Name, "slots", FormatRanges(m.Slots), "reason", m.Reason)
	return e.moveSlots(ctx, c, src, dst, others, expand(m.Slots), pace, tr)
}

// selfRecord reads a node's own CLUSTER NODES entry now.
func (e *Engine) selfRecord(ctx context.Context, c *conns, n *NodeView) (*NodeRecord, error) {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	text, err := c.get(n.Endpoint.Addr).ClusterNodes(cctx).Result()
	if err != nil {
		return nil, classify(err)
	}
	recs, err := ParseClusterNodes(text)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		if recs[i].Flags.Myself {
			return &recs[i], nil
		}
	}
	return nil, parseErr("%s: no myself entry", n.Endpoint.Name)
}

func execPipe(ctx context.Context, pipe redis.Pipeliner, name string) error {
	if pipe.Len() == 0 {
		return nil
	}
	cmds, err := pipe.Exec(ctx)
	if err == nil {
		return nil
	}
	for _, cmd := range cmds {
		if cerr := cmd.Err(); cerr != nil {
			return fmt.Errorf("%s: %s: %w", name, strings.Join(argStrings(cmd.Args()), " "), classify(cerr))
		}
	}
	return fmt.Errorf("%s: %w", name, classify(err))
}

// argStrings renders command arguments for error messages, without MIGRATE's password and
// key lists.
func argStrings(args []any) []string {
	out := make([]string, 0, min(len(args), 6))
	for i, a := range args {
		if i >= 5 {
			out = append(out, "…")
			break
		}
		out = append(out, fmt.Sprint(a))
	}
	return out
}
