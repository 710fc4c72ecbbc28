package topology

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// A node answering a client's steady commands counts as serving clients and puts the moves
// touching it at the serving pace; idle nodes do not, and moves between them keep the full
// pace of Options. Nor does a node busy only with the engine's own commands a moment ago
// (its polls while gossip converges, a previous pass's moves), though INFO's
// instantaneous_ops_per_sec, an average over the last 1.6 s, still counts them.
func TestServingClients(t *testing.T) {
	nodes := redistest.Start(t, 4, redistest.Options{})
	e := New(Options{})
	eps := []Endpoint{{Name: "idle", Addr: nodes[0].Addr()}, {Name: "busy", Addr: nodes[1].Addr()}, {Name: "idle2", Addr: nodes[2].Addr()},
		{Name: "polled", Addr: nodes[3].Addr()}}
	ctx := context.Background()
	view, err := e.Observe(ctx, eps)
	if err != nil {
		t.Fatal(err)
	}
	c := e.newConns()
	defer c.close()

	// A client sends 200 PINGs a second to busy until the test ends; the engine's own
	// connection sends as many to polled for 2 s, then stops.
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		cl := nodes[1].Client()
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-time.After(5 * time.Millisecond):
			}
			if err := cl.Ping(ctx).Err(); err != nil {
				done <- err
				return
			}
		}
	}()
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("the client of busy: %v", err)
		}
	}()
	own := c.get(nodes[3].Addr())
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if err := own.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ops, err := own.Info(ctx, "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(parseKV(ops)["instantaneous_ops_per_sec"]); n < 10 {
		t.Fatalf("polled: instantaneous_ops_per_sec %d right after the engine's PINGs, want at least 10 (else this test shows nothing)", n)
	}

	moves := []Step{{Kind: StepMigrate, Node: "idle", Target: "busy"}, {Kind: StepMigrate, Node: "polled", Target: "idle2"}}
	serving := e.servingClients(ctx, c, view, moves)
	if !slices.Equal(serving, []string{"busy"}) {
		t.Fatalf("serving clients: %v, want [busy]", serving)
	}
	if got, want := e.pace(serving), (migratePace{parallel: servingParallel, slotsPerRound: servingSlotsPerRound,
		emptyRoundsUpTo: servingSlotsPerRound, roundBytes: servingRoundBytes, chunkTime: servingChunkTime, minChunk: servingMinChunk, announceAtEnd: true}); got != want {
		t.Errorf("pace with busy serving: %+v, want %+v", got, want)
	}
	if got := e.servingClients(ctx, c, view, moves[1:]); len(got) != 0 {
		t.Fatalf("serving clients among polled and idle2: %v, want none", got)
	}
	full := migratePace{parallel: e.opts.MigrateParallel, slotsPerRound: e.opts.MigrateSlotsPerRound,
		emptyRoundsUpTo: 64 * e.opts.MigrateSlotsPerRound, roundBytes: e.opts.MigrateRoundBytes}
	if got := e.pace(nil); got != full {
		t.Errorf("pace with no node serving: %+v, want %+v", got, full)
	}
}

// At the serving pace a move's MIGRATE chunks follow the source: a chunk slower than the
// target halves the next (down to a single batch), a quick and full one doubles it (up to
// MigrateRoundBytes), and a batch never exceeds the chunk; at the full pace they stay as
// Options set them, whatever the source shows.
func TestChunkSizerFollowsTheSource(t *testing.T) {
	e := New(Options{})
	s := newChunkSizer(e.pace([]string{"busy"}), e.opts.MigrateBatchBytes, e.opts.MigrateRoundBytes)
	chunk, batch := s.size()
	if chunk != servingRoundBytes || batch != servingRoundBytes {
		t.Fatalf("first chunk %d B, batch %d B; want both %d", chunk, batch, servingRoundBytes)
	}
	s.observe(chunk, 3*servingChunkTime)
	if got, _ := s.size(); got != servingRoundBytes/2 {
		t.Errorf("after a slow chunk: %d B, want %d", got, servingRoundBytes/2)
	}
	for range 40 {
		c, _ := s.size()
		s.observe(c, 10*servingChunkTime)
	}
	if got, b := s.size(); got != servingMinChunk || b != servingMinChunk {
		t.Errorf("after slow chunks: chunk %d B, batch %d B; want the floor, %d", got, b, servingMinChunk)
	}
	for range 40 {
		c, _ := s.size()
		s.observe(c, servingChunkTime/10)
	}
	if got, b := s.size(); got != e.opts.MigrateRoundBytes || b != e.opts.MigrateBatchBytes {
		t.Errorf("after quick chunks: chunk %d B, batch %d B; want %d and %d", got, b, e.opts.MigrateRoundBytes, e.opts.MigrateBatchBytes)
	}
	before, _ := s.size()
	s.observe(before/10, servingChunkTime/10) // a small last chunk tells nothing about a bigger one
	s.observe(before, servingChunkTime/2)     // neither does one between a quarter and the target
	if got, _ := s.size(); got != before {
		t.Errorf("chunk %d B after a small quick chunk and a fair one, want %d unchanged", got, before)
	}

	full := newChunkSizer(e.pace(nil), e.opts.MigrateBatchBytes, e.opts.MigrateRoundBytes)
	full.observe(e.opts.MigrateRoundBytes, time.Minute)
	if c, b := full.size(); c != e.opts.MigrateRoundBytes || b != e.opts.MigrateBatchBytes {
		t.Errorf("full pace after a slow chunk: chunk %d B, batch %d B; want %d and %d", c, b, e.opts.MigrateRoundBytes, e.opts.MigrateBatchBytes)
	}
}
