package topology

import (
	"context"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// A node answering a client's steady commands counts as serving clients and makes its moves
// pipeline one MIGRATE at a time; an idle node does not, and a move between idle nodes keeps
// MigrateRoundBytes.
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
	if !serving[nodes[1].Addr()] || serving[nodes[0].Addr()] || serving[nodes[2].Addr()] {
		t.Fatalf("serving clients: %v, want only busy (%s)", serving, nodes[1].Addr())
	}
	idle, busy, idle2 := view.Node("idle"), view.Node("busy"), view.Node("idle2")
	if got := e.roundBytes(serving, idle, busy); got != 1 {
		t.Errorf("move to the busy node pipelines %d bytes, want 1 (one MIGRATE at a time)", got)
	}
	if got := e.roundBytes(serving, busy, idle); got != 1 {
		t.Errorf("move from the busy node pipelines %d bytes, want 1 (one MIGRATE at a time)", got)
	}
	if got := e.roundBytes(serving, idle, idle2); got != e.opts.MigrateRoundBytes {
		t.Errorf("move between idle nodes pipelines %d bytes, want MigrateRoundBytes %d", got, e.opts.MigrateRoundBytes)
	}
}
