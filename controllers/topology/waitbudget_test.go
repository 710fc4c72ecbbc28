package topology

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
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
	// Each poll of the wait reports the observation that found it (the
	// controller writes it at once when it is a fault): Observed on the wait's
	// reports only, showing s0-0 unreachable.
	var waits, observed, unreachable int
	report := func(p Progress) {
		if strings.HasPrefix(p.Step, "Wait: ") {
			waits++
		}
		if p.Observed != nil {
			observed++
			if !strings.HasPrefix(p.Step, "Wait: ") {
				t.Errorf("Observed on a report of %q", p.Step)
			}
			if p.Observed.View != nil && !p.Observed.View.Node("s0-0").Reachable() {
				unreachable++
			}
		}
	}
	res, err := New(Options{WaitBudget: time.Second, Logger: c.engine.opts.Logger}).Reconcile(ctx, cut, report)
	if waits == 0 || observed != waits || unreachable != waits {
		t.Errorf("%d wait reports, %d with the observation, %d of them showing s0-0 unreachable", waits, observed, unreachable)
	}
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

// silentAddr is a loopback address that accepts TCP connections and never answers on them,
// as a frozen node, or one behind a network that swallows packets, makes every command wait
// out its timeout. It counts the connections it accepted.
func silentAddr(t *testing.T) (string, *atomic.Int32) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String(), &accepted
}

// TestWaitBudgetCountsTheObservation: when observing takes as long as the wait budget (a
// node that does not answer makes the observation wait out the command timeout), the pass
// returns after that one observation, ErrNotReady naming the shard, instead of observing
// again: the status then says what was seen one observation sooner.
func TestWaitBudgetCountsTheObservation(t *testing.T) {
	c := newTestCluster(t, redistest.Options{}, Options{})
	all, _ := c.form(3, 2)

	cut := c.desired(1, all)
	addr, accepted := silentAddr(t)
	cut.Shards[0].Nodes[0].Addr = addr
	e := New(Options{WaitBudget: time.Second, CommandTimeout: time.Second, DialTimeout: time.Second, Logger: c.engine.opts.Logger})
	res, err := e.Reconcile(context.Background(), cut, nil)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "shard s0") {
		t.Fatalf("Reconcile returned %v, want ErrNotReady naming shard s0", err)
	}
	if res == nil || res.View == nil || res.View.Node("s0-0").Reachable() {
		t.Fatalf("the result does not show s0-0 unreachable: %+v", res)
	}
	if n := accepted.Load(); n != 1 {
		t.Fatalf("the silent node was dialled %d times, want once: one observation", n)
	}
}
