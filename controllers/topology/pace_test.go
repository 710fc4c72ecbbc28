package topology

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// A node answering a client's steady commands counts as serving clients and puts the moves
// touching it at the gentle pace; idle nodes do not, and moves between them keep the full
// pace of Options.
func TestServingClients(t *testing.T) {
	nodes := redistest.Start(t, 3, redistest.Options{})
	e := New(Options{})
	eps := []Endpoint{{Name: "idle", Addr: nodes[0].Addr()}, {Name: "busy", Addr: nodes[1].Addr()}, {Name: "idle2", Addr: nodes[2].Addr()}}
	ctx := context.Background()

	// 200 PINGs a second for 2 s: INFO's instantaneous_ops_per_sec averages the last 1.6 s.
	cl := nodes[1].Client()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if err := cl.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	view, err := e.Observe(ctx, eps)
	if err != nil {
		t.Fatal(err)
	}
	c := e.newConns()
	defer c.close()
	moves := []Step{{Kind: StepMigrate, Node: "idle", Target: "busy"}, {Kind: StepMigrate, Node: "idle", Target: "idle2"}}
	serving := e.servingClients(ctx, c, view, moves)
	if !slices.Equal(serving, []string{"busy"}) {
		t.Fatalf("serving clients: %v, want [busy]", serving)
	}
	if got, want := e.pace(serving), (migratePace{parallel: 1, slotsPerRound: 1, roundBytes: 1}); got != want {
		t.Errorf("pace with busy serving: %+v, want %+v", got, want)
	}
	if got := e.servingClients(ctx, c, view, moves[1:]); len(got) != 0 {
		t.Fatalf("serving clients among idle and idle2: %v, want none", got)
	}
	full := migratePace{parallel: e.opts.MigrateParallel, slotsPerRound: e.opts.MigrateSlotsPerRound, roundBytes: e.opts.MigrateRoundBytes,
		overlapAnnounce: true}
	if got := e.pace(nil); got != full {
		t.Errorf("pace with no node serving: %+v, want %+v", got, full)
	}
}
