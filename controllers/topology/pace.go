package topology

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// migratePace is how hard a set of moves presses on the nodes.
type migratePace struct {
	parallel      int // moves running at once
	slotsPerRound int // slots one move handles together (SETSLOT, GETKEYSINSLOT pipelined)
	// emptyRoundsUpTo is how many slots that held no key when counted one round takes
	// (moveSlots): an empty slot costs a few small SETSLOTs, and the round trips are what a
	// busy machine slows. At most slotsPerRound (no count) at the gentle pace.
	emptyRoundsUpTo int
	roundBytes      int64 // MIGRATE bytes pipelined to a source at once; a chunk holds one batch at least
	// overlapAnnounce tells the other masters a round's new owner while the next round runs.
	overlapAnnounce bool
}

// pace is the pace of moves: as fast as Options allow (MigrateParallel, MigrateSlotsPerRound,
// MigrateRoundBytes) while no node they touch serves clients, and otherwise gentle, as
// redis-cli --cluster rebalance moves: one move at a time, one slot per round, one MIGRATE in
// flight and the other masters told between rounds, so that a client's command waits behind
// one small command at most. Measured on 2 quiet cores under 5 000 writes/s of 100 B
// (BenchmarkReshardUnderLoad, 200 000 keys): 3→4 masters took 5.1 s with write p99 2.1 ms
// against redis-cli's 5.5 s and 2.6 ms (0.9 s and 9 ms at the full pace); 4→8 took 12.4 s,
// p99 2.4 ms, against 17.0 s and 2.7 ms (2.1 s and 18 ms at the full pace).
func (e *Engine) pace(serving []string) migratePace {
	if len(serving) > 0 {
		return migratePace{parallel: 1, slotsPerRound: 1, emptyRoundsUpTo: 1, roundBytes: 1}
	}
	return migratePace{parallel: e.opts.MigrateParallel, slotsPerRound: e.opts.MigrateSlotsPerRound,
		emptyRoundsUpTo: emptyRoundGrowth * e.opts.MigrateSlotsPerRound, roundBytes: e.opts.MigrateRoundBytes, overlapAnnounce: true}
}

// emptyRoundGrowth is how many times MigrateSlotsPerRound one round of empty slots may
// hold at the full pace (migratePace.emptyRoundsUpTo): 64 × 64 = 4 096 slots, so each
// source's 1 365 slots in a 3→4 scale-out of an empty cluster move in one round (four
// round trips) instead of 22, and a round whose slots filled up since the count queues
// GETKEYSINSLOT for 4 096 slots at most.
const emptyRoundGrowth = 64

// servingSample is how long servingClients watches a node that looks busy before judging it.
const servingSample = 250 * time.Millisecond

// servingClients reads INFO stats from every node the moves read from or write to (in
// parallel) and returns, sorted, the names of those serving clients. A node whose
// instantaneous_ops_per_sec, Redis's average over its last 16 samples taken every 100 ms
// (INFO docs, "stats" section), is under MigrateServingOps is idle. That average also counts
// the engine's own recent commands (its polls while gossip converges, the previous pass's
// moves), so a node at or above it is watched for servingSample, in which the engine sends it
// nothing but a second INFO: it serves clients when total_commands_processed grew by
// MigrateServingOps a second or more, less the first INFO itself. A readiness probe's AUTH
// and INFO stay under that. A node that does not answer counts as serving (its move will
// report the error).
func (e *Engine) servingClients(ctx context.Context, c *conns, view *ClusterView, moves []Step) []string {
	nodes := map[string]*NodeView{}
	for _, m := range moves {
		for _, name := range []string{m.Node, m.Target} {
			if n, err := node(view, name); err == nil {
				nodes[name] = n
			}
		}
	}
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		serving []string
	)
	for name, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e.serves(ctx, c.get(n.Endpoint.Addr)) {
				mu.Lock()
				serving = append(serving, name)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.Sort(serving)
	return serving
}

// serves is servingClients' judgement of one node.
func (e *Engine) serves(ctx context.Context, cl *redis.Client) bool {
	stats := func() (ops, total int64, at time.Time, ok bool) {
		cctx, cancel := e.cmdCtx(ctx)
		defer cancel()
		text, err := cl.Info(cctx, "stats").Result()
		at = time.Now()
		kv := parseKV(text)
		ops, perr := strconv.ParseInt(kv["instantaneous_ops_per_sec"], 10, 64)
		total, terr := strconv.ParseInt(kv["total_commands_processed"], 10, 64)
		return ops, total, at, err == nil && perr == nil && terr == nil
	}
	ops, total0, t0, ok := stats()
	if !ok {
		return true
	}
	if ops < e.opts.MigrateServingOps {
		return false
	}
	if sleep(ctx, servingSample) != nil {
		return true
	}
	_, total1, t1, ok := stats()
	if !ok {
		return true
	}
	others := float64(total1 - total0 - 1)
	return others >= float64(e.opts.MigrateServingOps)*t1.Sub(t0).Seconds()
}
