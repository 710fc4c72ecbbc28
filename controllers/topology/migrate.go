package topology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// moveSlots migrates slots from src to dst following the spec's "Live resharding" order,
// pace.slotsPerRound slots per pipelined round; at the full pace the source's keys are
// counted first (CLUSTER COUNTKEYSINSLOT, one pipeline) and a run of slots that held none
// is one round of up to pace.emptyRoundsUpTo slots (a key written meanwhile is moved as in
// any round):
//
//  1. CLUSTER SETSLOT <slot> IMPORTING <src-id> on dst (so dst accepts ASK-redirected
//     commands before src starts redirecting);
//  2. CLUSTER SETSLOT <slot> MIGRATING <dst-id> on src;
//  3. CLUSTER GETKEYSINSLOT + MIGRATE ... KEYS on src until the slots are empty, without
//     REPLACE (see drainKeys);
//  4. CLUSTER SETSLOT <slot> NODE <dst-id> on dst, then on src, then on the other masters.
//
// Each slot's current state is read first, so a half-done slot resumes where it stopped.
// Cancelling ctx is honoured between MIGRATE chunks (each bounded in bytes): the slots of
// the round in flight are then settled (settleRound) — finished where keys of theirs
// already reached dst or none is left on src, rolled back otherwise — so no slot is left
// open, and moveSlots returns ctx.Err().
func (e *Engine) moveSlots(ctx context.Context, c *conns, src, dst *NodeView, others []*NodeView, slots []int, pace migratePace, tr *tracker) error {
	srcSelf, err := e.selfRecord(ctx, c, src)
	if err != nil {
		return err
	}
	dstSelf, err := e.selfRecord(ctx, c, dst)
	if err != nil {
		return err
	}
	m := &move{c: c, src: src, dst: dst, srcSelf: srcSelf, dstSelf: dstSelf,
		srcOwns: SlotSetOf(srcSelf.Slots...), dstOwns: SlotSetOf(dstSelf.Slots...), pace: pace,
		chunks: newChunkSizer(pace, e.opts.MigrateBatchBytes, e.opts.MigrateRoundBytes)}
	// Telling the other masters is optional (gossip spreads it too): at the full pace it
	// overlaps the next round instead of delaying it; at the serving pace it comes once, when
	// the move ends (migratePace.announceAtEnd).
	var announced sync.WaitGroup
	defer announced.Wait()
	var unannounced []int
	defer func() {
		if len(unannounced) > 0 {
			e.announce(ctx, c, others, dst.ID, unannounced)
		}
	}()
	var counts []int64
	if pace.emptyRoundsUpTo > pace.slotsPerRound {
		srcCl, _ := m.clients()
		// Best effort: without the counts every round has pace.slotsPerRound slots.
		counts, _ = e.countKeys(ctx, srcCl, src.Endpoint.Name, slots)
	}
	for start := 0; start < len(slots); {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := min(start+pace.slotsPerRound, len(slots))
		if empty := emptyRun(counts, start, pace.emptyRoundsUpTo); empty > end-start {
			end = start + empty
		}
		round := slots[start:end]
		start = end
		keys, finished, err := e.moveRound(ctx, m, round)
		switch {
		case len(finished) > 0 && pace.announceAtEnd:
			unannounced = append(unannounced, finished...)
		case len(finished) > 0:
			announced.Add(1)
			go func() {
				defer announced.Done()
				e.announce(ctx, c, others, dst.ID, finished)
			}()
		}
		tr.update(func(p *Progress) {
			p.SlotsMoved += len(finished)
			p.KeysMoved += keys
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// emptyRun is how many slots from index start on held no key when counted (counts, one per
// slot of the move; nil when not counted), at most most.
func emptyRun(counts []int64, start, most int) int {
	n := 0
	for start+n < len(counts) && n < most && counts[start+n] == 0 {
		n++
	}
	return n
}

// move is the state of one source→target move shared by its rounds.
type move struct {
	c                *conns
	src, dst         *NodeView
	srcSelf, dstSelf *NodeRecord
	srcOwns, dstOwns SlotSet
	pace             migratePace
	chunks           *chunkSizer // MIGRATE chunk and batch bytes, adapted at the serving pace
}

func (m *move) clients() (*redis.Client, *redis.Client) {
	return m.c.get(m.src.Endpoint.Addr), m.c.get(m.dst.Endpoint.Addr)
}

// moveRound runs the four steps for one round of slots and returns the keys moved and the
// slots that now belong to dst. On cancellation it settles the round and returns ctx.Err().
func (e *Engine) moveRound(ctx context.Context, m *move, round []int) (int64, []int, error) {
	for _, s := range round {
		if !m.srcOwns.Has(s) && !m.dstOwns.Has(s) {
			// Someone else owns it now: SETSLOT NODE on dst would steal it. Re-plan instead.
			return 0, nil, fmt.Errorf("%w: slot %d is owned by neither %s nor %s any more", ErrConflict, s, m.src.Endpoint.Name, m.dst.Endpoint.Name)
		}
	}
	srcCl, dstCl := m.clients()
	// Steps 1 and 2 are two short pipelines: they always run together, so a cancellation
	// never leaves a slot importing without migrating.
	cctx, cancel := e.cmdCtx(context.WithoutCancel(ctx))
	defer cancel()
	pipe := dstCl.Pipeline()
	for _, s := range round {
		if !m.dstOwns.Has(s) && m.dstSelf.Importing[s] != m.src.ID {
			pipe.Do(cctx, "CLUSTER", "SETSLOT", s, "IMPORTING", m.src.ID)
		}
	}
	if err := execPipe(cctx, pipe, m.dst.Endpoint.Name); err != nil {
		return 0, nil, err
	}
	pipe = srcCl.Pipeline()
	for _, s := range round {
		if m.srcOwns.Has(s) && m.srcSelf.Migrating[s] != m.dst.ID {
			pipe.Do(cctx, "CLUSTER", "SETSLOT", s, "MIGRATING", m.dst.ID)
		}
	}
	// The first key scan rides in the same pipeline, after MIGRATING: one round trip less.
	gets := e.queueKeysInSlots(cctx, pipe, round)
	if err := execPipe(cctx, pipe, m.src.Endpoint.Name); err != nil {
		return 0, nil, err
	}
	keys, err := e.drainKeys(ctx, m.c, m.src, m.dst, round, gets, m.chunks)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			more, finished, serr := e.settleRound(ctx, m, round)
			return keys + more, finished, errors.Join(ctx.Err(), serr)
		}
		return keys, nil, err
	}
	more, err := e.finishSlots(context.WithoutCancel(ctx), m, round)
	if err != nil {
		return keys + more, nil, err
	}
	return keys + more, round, nil
}

// finishSlots is step 4 for slots whose keys are all on dst: CLUSTER SETSLOT NODE on dst,
// then on src (moving keys that arrived on src after the scan first). It returns the keys
// moved by that second pass.
func (e *Engine) finishSlots(ctx context.Context, m *move, slots []int) (int64, error) {
	if len(slots) == 0 {
		return 0, nil
	}
	srcCl, dstCl := m.clients()
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	pipe := dstCl.Pipeline()
	for _, s := range slots {
		pipe.Do(cctx, "CLUSTER", "SETSLOT", s, "NODE", m.dst.ID)
	}
	if err := execPipe(cctx, pipe, m.dst.Endpoint.Name); err != nil {
		return 0, err
	}
	var keys int64
	for attempt := 0; ; attempt++ {
		pipe = srcCl.Pipeline()
		cmds := make([]*redis.Cmd, len(slots))
		for i, s := range slots {
			cmds[i] = pipe.Do(cctx, "CLUSTER", "SETSLOT", s, "NODE", m.dst.ID)
		}
		if _, err := pipe.Exec(cctx); connErr(err) != nil {
			return keys, fmt.Errorf("%s: %w", m.src.Endpoint.Name, connErr(err))
		}
		var again []int
		var errs []error
		for i, cmd := range cmds {
			switch err := cmd.Err(); {
			case err == nil:
			case strings.Contains(err.Error(), "still hold keys") && attempt == 0:
				again = append(again, slots[i]) // a key arrived after the scan: move it too
			case strings.Contains(err.Error(), "only with masters"):
				// The source learned from dst's gossip that its last slots moved and, as Redis
				// 7.0 does with cluster-allow-replica-migration, turned into dst's replica: the
				// slot is already dst's everywhere it matters.
			default:
				errs = append(errs, fmt.Errorf("%s: SETSLOT %d NODE: %w", m.src.Endpoint.Name, slots[i], classify(err)))
			}
		}
		if len(errs) > 0 {
			return keys, errors.Join(errs...)
		}
		if len(again) == 0 {
			break
		}
		more, err := e.drainKeys(ctx, m.c, m.src, m.dst, again, nil, m.chunks)
		keys += more
		if err != nil {
			return keys, err
		}
	}
	for _, s := range slots {
		m.srcOwns.Remove(s)
		m.dstOwns.Add(s)
		delete(m.srcSelf.Migrating, s)
		delete(m.dstSelf.Importing, s)
	}
	return keys, nil
}

// settleRound closes the slots of a round interrupted by cancellation, outside the
// cancelled context. A slot some of whose keys are already on dst (CLUSTER
// COUNTKEYSINSLOT), or that has none left on src, is finished; the others are rolled back:
// CLUSTER SETSLOT STABLE on dst (it stops accepting ASK-redirected writes), keys a client
// wrote there meanwhile moved back to src, then SETSLOT STABLE on src. It returns the keys
// moved and the slots finished.
func (e *Engine) settleRound(ctx context.Context, m *move, round []int) (int64, []int, error) {
	sctx := context.WithoutCancel(ctx)
	srcCl, dstCl := m.clients()
	srcCounts, err := e.countKeys(sctx, srcCl, m.src.Endpoint.Name, round)
	if err != nil {
		return 0, nil, err
	}
	dstCounts, err := e.countKeys(sctx, dstCl, m.dst.Endpoint.Name, round)
	if err != nil {
		return 0, nil, err
	}
	var finish, back []int
	for i, s := range round {
		if dstCounts[i] > 0 || srcCounts[i] == 0 {
			finish = append(finish, s)
		} else {
			back = append(back, s)
		}
	}
	e.log.Info("Migration cancelled; settling the round in flight", "from", m.src.Endpoint.Name, "to", m.dst.Endpoint.Name,
		"finishing", FormatRanges(RangesOf(finish)), "rollingBack", FormatRanges(RangesOf(back)))
	var keys int64
	if len(finish) > 0 {
		moved, err := e.drainKeys(sctx, m.c, m.src, m.dst, finish, nil, m.chunks)
		keys += moved
		if err != nil {
			return keys, nil, err
		}
		more, err := e.finishSlots(sctx, m, finish)
		keys += more
		if err != nil {
			return keys, nil, err
		}
	}
	if len(back) > 0 {
		if err := e.setStable(sctx, dstCl, m.dst.Endpoint.Name, back); err != nil {
			return keys, finish, err
		}
		if _, err := e.drainKeys(sctx, m.c, m.dst, m.src, back, nil, m.chunks); err != nil {
			return keys, finish, err
		}
		if err := e.setStable(sctx, srcCl, m.src.Endpoint.Name, back); err != nil {
			return keys, finish, err
		}
		for _, s := range back {
			delete(m.srcSelf.Migrating, s)
			delete(m.dstSelf.Importing, s)
		}
	}
	return keys, finish, nil
}

// countKeys runs CLUSTER COUNTKEYSINSLOT for each slot, pipelined.
func (e *Engine) countKeys(ctx context.Context, cl *redis.Client, name string, slots []int) ([]int64, error) {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	pipe := cl.Pipeline()
	cmds := make([]*redis.IntCmd, len(slots))
	for i, s := range slots {
		cmds[i] = pipe.ClusterCountKeysInSlot(cctx, s)
	}
	if err := execPipe(cctx, pipe, name); err != nil {
		return nil, err
	}
	out := make([]int64, len(slots))
	for i, cmd := range cmds {
		out[i] = cmd.Val()
	}
	return out, nil
}

// setStable runs CLUSTER SETSLOT <slot> STABLE for each slot, pipelined.
func (e *Engine) setStable(ctx context.Context, cl *redis.Client, name string, slots []int) error {
	cctx, cancel := e.cmdCtx(ctx)
	defer cancel()
	pipe := cl.Pipeline()
	for _, s := range slots {
		pipe.Do(cctx, "CLUSTER", "SETSLOT", s, "STABLE")
	}
	return execPipe(cctx, pipe, name)
}

// announce tells the other masters the new owner (step 6 of the live resharding order,
// optional: gossip would spread it too, but this makes their MOVED replies right at once).
// It also keeps them serving when a source gives up its last slots: the source turns into
// the target's replica as soon as it hears the target's claim, and a master that learns that
// role change before the claim drops the source's slots and reports cluster_state:fail
// until the claim arrives (seen without this step in TestScaleOutAndIn/3-8-5 under load).
// The price on Redis 7.0.13–7.0.15 and 7.2.0–7.2.3: a master that heard the source ping
// without a slot before this command keeps an "owner not claiming" mark on it
// (TestRedisKeepsStaleOwnerMark), which a later import of that slot into it can pay with
// the moved keys; the window is the time between the source's finalize and this command.
func (e *Engine) announce(ctx context.Context, c *conns, others []*NodeView, dstID string, round []int) {
	var wg sync.WaitGroup
	for _, o := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := e.cmdCtx(context.WithoutCancel(ctx))
			defer cancel()
			pipe := c.get(o.Endpoint.Addr).Pipeline()
			for _, s := range round {
				pipe.Do(cctx, "CLUSTER", "SETSLOT", s, "NODE", dstID)
			}
			if _, err := pipe.Exec(cctx); err != nil {
				e.log.V(1).Info("Other master not told the new owner; gossip will", "node", o.Endpoint.Name, "reason", err.Error())
			}
		}()
	}
	wg.Wait()
}
