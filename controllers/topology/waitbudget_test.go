package topology

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// TestWaitBudget: with a master the engine cannot reach (while the rest of the cluster still
// sees it), Reconcile can only wait for Redis. With WaitBudget set it returns ErrNotReady
// naming the shard it waits for, with a Result whose view shows the master unreachable, long
// before its context ends, so the controller can report that observation.
func TestWaitBudget(t *testing.T) {
	c := newTestCluster(t, redistest.Options{}, Options{})
	all, _ := c.form(3, 2)

	cut := c.desired(1, all)
	cut.Shards[0].Nodes[0].Addr = deadAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// An engine of its own: the cluster's formation above waits for gossip longer than 1 s.
	res, err := New(Options{WaitBudget: time.Second, Logger: c.engine.opts.Logger}).Reconcile(ctx, cut, nil)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "shard s0") {
		t.Fatalf("Reconcile returned %v, want ErrNotReady naming shard s0", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Reconcile held on until its context ended")
	}
	if res == nil || res.View == nil || res.View.Node("s0-0").Reachable() {
		t.Fatalf("the result does not show s0-0 unreachable: %+v", res)
	}
}

// TestDeadlineEndsAWait: the caller's deadline (the controller's pass budget) ending a run of
// waits gives ErrNotReady naming what the engine waited for, and the last observation:
// nothing is half done, so there is nothing to observe again (each observation waits out
// the dial timeout of the nodes that do not answer).
func TestDeadlineEndsAWait(t *testing.T) {
	c := newTestCluster(t, redistest.Options{}, Options{})
	all, _ := c.form(3, 2)

	cut := c.desired(1, all)
	cut.Shards[0].Nodes[0].Addr = deadAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	res, err := New(Options{Logger: c.engine.opts.Logger}).Reconcile(ctx, cut, nil)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "shard s0") {
		t.Fatalf("Reconcile returned %v, want ErrNotReady naming shard s0", err)
	}
	if res == nil || res.View == nil || res.View.Node("s0-0").Reachable() {
		t.Fatalf("the result does not show s0-0 unreachable: %+v", res)
	}
}
