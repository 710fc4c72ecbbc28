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
	// busy machine slows. At most slotsPerRound (no count) at the serving pace.
	emptyRoundsUpTo int
	roundBytes      int64 // MIGRATE bytes pipelined to a source at once; a chunk holds one batch at least
	// chunkTime, when set, makes roundBytes only the first chunk's size: each move then sizes
	// its chunks (and its MIGRATE batches) by how long the source took to run the previous
	// one (chunkSizer), so that a source serving clients is kept from them about this long at
	// a time.
	chunkTime time.Duration
	minChunk  int64 // with chunkTime, the fewest bytes a chunk (and a batch) is cut down to
	// announceAtEnd tells the other masters the new owner of the move's slots once, when the
	// move ends (gossip tells them sooner): every CLUSTER SETSLOT NODE makes a master rewrite
	// and fsync its nodes.conf before it serves anyone again. Otherwise they are told each
	// round's while the next round runs.
	announceAtEnd bool
}

// pace is the pace of moves: as fast as Options allow (MigrateParallel, MigrateSlotsPerRound,
// MigrateRoundBytes) while no node they touch serves clients, and otherwise the serving pace.
// What a client of a master waits for is the master's event loop and, on a small machine, a
// core: the loop runs one connection's pipelined commands back to back, a MIGRATE holds it
// until the target stored the keys, and every CLUSTER SETSLOT NODE makes it rewrite and fsync
// nodes.conf. So at the serving pace one move runs at a time (several side by side kept both
// cores of the benchmark's machine busy and tripled the writes' p99), in pipelined rounds of
// servingSlotsPerRound slots instead of redis-cli's one, each chunk of MIGRATEs sized by how
// long the source took to run the previous one (chunkSizer: servingChunkTime, never under
// servingMinChunk, starting at servingRoundBytes), and the other masters are told the new
// owner once, when the move ends (gossip tells them sooner). BenchmarkReshardUnderLoad
// (docs/performance.md) compares it with redis-cli under 5 000 writes/s.
func (e *Engine) pace(serving []string) migratePace {
	if len(serving) > 0 {
		return migratePace{parallel: servingParallel, slotsPerRound: servingSlotsPerRound,
			emptyRoundsUpTo: servingSlotsPerRound, roundBytes: min(servingRoundBytes, e.opts.MigrateRoundBytes),
			chunkTime: servingChunkTime, minChunk: servingMinChunk, announceAtEnd: true}
	}
	return migratePace{parallel: e.opts.MigrateParallel, slotsPerRound: e.opts.MigrateSlotsPerRound,
		emptyRoundsUpTo: emptyRoundGrowth * e.opts.MigrateSlotsPerRound, roundBytes: e.opts.MigrateRoundBytes}
}

// The serving pace (Engine.pace): moves at once, slots per round, the first chunk's MIGRATE
// bytes, the fewest a chunk and a batch may hold, and how long one chunk should keep a source
// from its clients. The floor keeps a busy machine (where every round trip takes a
// millisecond or more) from shrinking the batches to one key each, a MIGRATE round trip per
// key: redis-cli moves 10 keys per MIGRATE whatever their size.
const (
	servingParallel      = 1
	servingSlotsPerRound = 8
	servingRoundBytes    = 16 << 10
	servingMinChunk      = 4 << 10
	servingChunkTime     = time.Millisecond
)

// chunkSizer sizes one move's MIGRATE chunks (drainKeys): the bytes pipelined to the source
// at once, and the bound of one MIGRATE ... KEYS batch (Options.MigrateBatchBytes, lowered to
// the chunk's size). With a target time (migratePace.chunkTime) it adapts to what the source
// shows: a chunk that took longer than the target halves the next one (never below
// migratePace.minChunk, nor one batch: a key larger than that still goes alone), one that
// took under a quarter of it doubles it (up to Options.MigrateRoundBytes). Safe for
// concurrent use.
type chunkSizer struct {
	mu                 sync.Mutex
	bytes, least, most int64
	batchBytes         int64
	target             time.Duration
}

// newChunkSizer returns the sizer of one move at pace p; batchBytes is
// Options.MigrateBatchBytes, most Options.MigrateRoundBytes.
func newChunkSizer(p migratePace, batchBytes, most int64) *chunkSizer {
	least := max(min(p.minChunk, p.roundBytes), 1)
	return &chunkSizer{bytes: max(p.roundBytes, 1), least: least, most: max(most, p.roundBytes, 1), batchBytes: batchBytes, target: p.chunkTime}
}

// size returns the bytes of the next chunk and the bound of one batch in it.
func (s *chunkSizer) size() (chunk, batch int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.target == 0 {
		return s.bytes, s.batchBytes
	}
	return s.bytes, min(s.batchBytes, s.bytes)
}

// observe records that a chunk of bytes took took on the source (its pipeline's round trip).
func (s *chunkSizer) observe(bytes int64, took time.Duration) {
	if s.target == 0 || bytes <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case took > s.target:
		s.bytes = max(s.bytes/2, s.least)
	case took < s.target/4 && bytes >= s.bytes/2:
		s.bytes = min(s.bytes*2, s.most)
	}
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
