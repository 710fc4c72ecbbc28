package topology

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// Behaviour 1: bootstrap N masters × R replicas from fresh nodes.
func TestBootstrap(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 5} {
		for _, r := range []int{0, 1, 2} {
			t.Run(fmt.Sprintf("%dx%d", n, r), func(t *testing.T) {
				c := newTestCluster(t, redistest.Options{Password: "pw-" + t.Name()}, Options{})
				names := c.addShards(n, 1+r)
				d := c.desired(r, names)
				res := c.reconcile(d, nil)
				c.assertShape(d, res)
				// The cluster serves reads and writes, and a second run has nothing to do.
				cc := c.client(d)
				ds := redistest.Dataset{Prefix: "boot", Keys: 500}
				redistest.Load(t, cc, ds)
				redistest.Verify(t, cc, ds)
				steps, err := Plan(c.observe(d), d)
				if err != nil || len(steps) != 0 {
					t.Fatalf("converged cluster plans %v (%v)", stepStrings(steps), err)
				}
			})
		}
	}
}

// slotWatch polls CLUSTER INFO on the given nodes while a reconcile runs and records the
// lowest cluster_slots_assigned and any cluster_state other than ok.
type slotWatch struct {
	stop     chan struct{}
	done     chan struct{}
	minSlots int
	notOK    int
}

func watchSlots(t *testing.T, nodes []*redistest.Node) *slotWatch {
	w := &slotWatch{stop: make(chan struct{}), done: make(chan struct{}), minSlots: NumSlots}
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = n.Client()
	}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			text, err := clients[i%len(clients)].ClusterInfo(ctx).Result()
			cancel()
			if err != nil {
				continue
			}
			info, err := ParseClusterInfo(text)
			if err != nil {
				continue
			}
			w.minSlots = min(w.minSlots, info.SlotsAssigned)
			if !info.OK() {
				w.notOK++
			}
		}
	}()
	return w
}

func (w *slotWatch) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	if w.minSlots != NumSlots || w.notOK > 0 {
		t.Fatalf("during the run a node reported only %d slots assigned, %d times cluster_state fail", w.minSlots, w.notOK)
	}
}

func masters(c *testCluster, shards []string) []*redistest.Node {
	var out []*redistest.Node
	for _, s := range shards {
		out = append(out, c.nodes[s][0])
	}
	return out
}

// leavingGuard, used as a progress callback, checks now and then that every leaving master
// still owning slots is known to every remaining node: never forgotten while it owns slots.
func leavingGuard(t *testing.T, c *testCluster, d Desired) (func(Progress), *Progress) {
	var last Progress
	calls := 0
	return func(p Progress) {
		last = p
		calls++
		if calls%15 != 1 {
			return
		}
		v := c.observe(d)
		for _, sh := range d.Leaving {
			for _, ep := range sh.Nodes {
				n := v.Node(ep.Name)
				if !n.Reachable() || n.OwnSlots().Len() == 0 {
					continue
				}
				for _, rem := range d.Shards {
					for _, rep := range rem.Nodes {
						if r := v.Node(rep.Name); r.Reachable() && r.Lookup(n.ID) == nil {
							t.Errorf("%s forgot %s while it owns %d slots", rep.Name, ep.Name, n.OwnSlots().Len())
						}
					}
				}
			}
		}
		a := assess(v, d)
		for _, name := range a.removable() {
			for _, ep := range shardOfEndpoint(d, name).Nodes {
				if n := v.Node(ep.Name); n.Reachable() && n.OwnSlots().Len() > 0 {
					t.Errorf("shard %s removable while %s owns slots", name, ep.Name)
				}
			}
		}
	}, &last
}

// Behaviours 2 and 3: scale out with data, then scale in, checking every key each time.
func TestScaleOutAndIn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		from, to, back, replicas int
	}{
		{from: 3, to: 4, back: 3, replicas: 1},
		{from: 3, to: 8, back: 5, replicas: 0},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d-%d-%d", tc.from, tc.to, tc.back), func(t *testing.T) {
			t.Parallel()
			c := newTestCluster(t, redistest.Options{}, Options{MigrateBatch: 300})
			all, d := c.form(tc.from, 1+tc.replicas)
			ds := redistest.Dataset{Prefix: "k", Keys: 100_000, LargeEvery: 2000, LargeFields: 2000}
			redistest.Load(t, c.client(d), ds)

			// Scale out.
			added := c.addShards(tc.to-tc.from, 1+tc.replicas)
			all = append(all, added...)
			d = c.desired(tc.replicas, all)
			w := watchSlots(t, masters(c, all[:tc.from]))
			wr := startWriter(t, c, d, "out")
			var last Progress
			res := c.reconcile(d, func(p Progress) { last = p })
			w.finish(t)
			wr.finish(t, c, d)
			c.assertShape(d, res)
			if want := NumSlots - tc.from*(NumSlots/tc.to); last.SlotsTotal != want || last.SlotsMoved != want {
				t.Fatalf("moved %d/%d slots, the fewest is %d", last.SlotsMoved, last.SlotsTotal, want)
			}
			var onNew int64
			for _, n := range masters(c, added) {
				onNew += n.Do("DBSIZE").(int64)
			}
			// The new masters hold the moved keys plus writes that arrived there during the run.
			if last.KeysMoved == 0 || last.KeysMoved > onNew || onNew-last.KeysMoved > int64(len(wr.acked)) {
				t.Fatalf("progress says %d keys moved, the new masters hold %d (%d concurrent writes)", last.KeysMoved, onNew, len(wr.acked))
			}
			redistest.Verify(t, c.client(d), ds)

			// Scale in: the last shards leave.
			keep, leave := all[:tc.back], all[tc.back:]
			d = c.desired(tc.replicas, keep, leave...)
			w = watchSlots(t, masters(c, keep))
			wr = startWriter(t, c, d, "in")
			guard, lastIn := leavingGuard(t, c, d)
			res = c.reconcile(d, guard)
			w.finish(t)
			wr.finish(t, c, d)
			if fmt.Sprint(res.Removable) != fmt.Sprint(leave) {
				t.Fatalf("removable %v, want %v", res.Removable, leave)
			}
			dKeep := c.desired(tc.replicas, keep)
			c.assertShape(dKeep, res)
			leavingSlots := len(leave) * (NumSlots / tc.to)
			if lastIn.SlotsMoved < leavingSlots {
				t.Fatalf("moved %d slots, leaving shards owned at least %d", lastIn.SlotsMoved, leavingSlots)
			}
			v := c.observe(d)
			for _, name := range leave {
				for _, ep := range c.spec(name).Nodes {
					gone := v.Node(ep.Name)
					if gone.OwnSlots().Len() > 0 {
						t.Fatalf("removable %s still owns slots", ep.Name)
					}
					for _, rem := range dKeep.endpoints() {
						if v.Node(rem.Name).Lookup(gone.ID) != nil {
							t.Fatalf("%s still knows removed %s", rem.Name, ep.Name)
						}
					}
				}
			}
			// The pods go away; the cluster stays converged and the data complete.
			for _, name := range leave {
				for _, n := range c.nodes[name] {
					n.Kill()
				}
			}
			c.assertShape(dKeep, c.reconcile(dKeep, nil))
			redistest.Verify(t, c.client(dKeep), ds)
		})
	}
}

// Behaviour 4a: cancelling the context mid-migration stops cleanly (no open slot, no key
// lost) and the next run finishes the job.
func TestInterruptedMigrationCancel(t *testing.T) {
	c := newTestCluster(t, redistest.Options{}, Options{MigrateSlotsPerRound: 32})
	all, d := c.form(3, 1)
	ds := redistest.Dataset{Prefix: "c", Keys: 30_000, LargeEvery: 1000, LargeFields: 500}
	redistest.Load(t, c.client(d), ds)

	all = append(all, c.addShards(1, 1)...)
	d = c.desired(0, all)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := c.engine.Reconcile(ctx, d, func(p Progress) {
		if p.SlotsMoved >= 500 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if res == nil || res.Converged {
		t.Fatalf("result after cancel: %+v", res)
	}
	v := c.observe(d)
	if open := openSlots(v); len(open) > 0 {
		t.Fatalf("open slots after cancel: %v", open)
	}
	if got := v.Node("s3-0").OwnSlots().Len(); got == 0 || got == NumSlots/4 {
		t.Fatalf("new master owns %d slots after cancel: the move was not interrupted", got)
	}
	redistest.Verify(t, c.client(d), ds)

	c.assertShape(d, c.reconcile(d, nil))
	redistest.Verify(t, c.client(d), ds)
}

// Behaviour 4b: kill -9 the destination mid-migration, while scaling out and while scaling
// in; after it restarts with its nodes.conf and AOF, the next run repairs the open slots
// and no key is lost. A leaving source with open slots is never forgotten nor removable.
func TestInterruptedMigrationKillTarget(t *testing.T) {
	t.Parallel()
	for _, scaleIn := range []bool{false, true} {
		t.Run(map[bool]string{false: "scale-out", true: "scale-in"}[scaleIn], func(t *testing.T) {
			// The full pace although loading the dataset just made the nodes busy (the
			// serving pace moves 8 slots per round): the kill must land inside a round.
			c := newTestCluster(t, redistest.Options{AppendFsyncAlways: true},
				Options{MigrateSlotsPerRound: 1024, MigrateBatch: 50, MigrateServingOps: math.MaxInt64})
			all := c.addShards(map[bool]int{false: 3, true: 4}[scaleIn], 1)
			d := c.desired(0, all)
			c.assertShape(d, c.reconcile(d, nil))
			ds := redistest.Dataset{Prefix: "k9", Keys: 20_000, LargeEvery: 1000, LargeFields: 500}
			redistest.Load(t, c.client(d), ds)

			var target *redistest.Node
			if scaleIn {
				d = c.desired(0, all[:3], all[3])
				target = c.nodes["s0"][0] // the first receiver of the leaving shard's slots
			} else {
				all = append(all, c.addShards(1, 1)...)
				d = c.desired(0, all)
				target = c.nodes["s3"][0]
			}
			before := target.Do("DBSIZE").(int64)
			// Kill the target while keys stream into it (inside a pipelined round).
			killed := make(chan struct{})
			go func() {
				defer close(killed)
				cl := target.Client()
				for {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					n, err := cl.DBSize(ctx).Result()
					cancel()
					if err == nil && n >= before+1500 {
						target.Kill()
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
			}()
			res, err := c.tryReconcile(d, nil, 2*time.Minute)
			<-killed
			if !errors.Is(err, ErrNotReady) {
				t.Fatalf("error %v, want ErrNotReady while the target is down", err)
			}
			if res.Converged || len(res.Removable) > 0 {
				t.Fatalf("converged %v, removable %v with the target down", res.Converged, res.Removable)
			}
			v := c.observe(d)
			open := openSlots(v)
			if len(open) == 0 {
				t.Fatal("no open slot left by the kill")
			}
			t.Logf("%d open slots after the kill", len(open))
			if scaleIn {
				leaving := v.Node("s3-0")
				for _, name := range []string{"s1-0", "s2-0"} {
					if v.Node(name).Lookup(leaving.ID) == nil {
						t.Fatalf("%s forgot the leaving master while it has open slots", name)
					}
				}
			}
			target.Restart()
			res = c.reconcile(d, nil)
			if scaleIn {
				if fmt.Sprint(res.Removable) != "[s3]" {
					t.Fatalf("removable %v", res.Removable)
				}
				d = c.desired(0, all[:3])
			}
			c.assertShape(d, res)
			redistest.Verify(t, c.client(d), ds)
		})
	}
}

// Behaviour 4c: a crash of the engine half-way through one slot, reproduced by hand: the
// slot is importing on the destination, migrating on the source, and part of its keys
// already moved. Another variant crashes between IMPORTING and MIGRATING. The next run
// finishes both and no key is lost.
func TestInterruptedMigrationCrashMidSlot(t *testing.T) {
	c := newTestCluster(t, redistest.Options{Password: "crash-pw"}, Options{})
	_, d := c.form(3, 1)
	ds := redistest.Dataset{Prefix: "m", Keys: 20_000}
	redistest.Load(t, c.client(d), ds)

	v := c.observe(d)
	src, dst := v.Node("s0-0"), v.Node("s1-0")
	srcN, dstN := c.nodes["s0"][0], c.nodes["s1"][0]
	// One slot half-moved, another importing only.
	var full []int
	for slot := 0; slot < NumSlots && len(full) < 2; slot++ {
		if src.OwnSlots().Has(slot) && srcN.Do("CLUSTER", "COUNTKEYSINSLOT", slot).(int64) >= 3 {
			full = append(full, slot)
		}
	}
	if len(full) < 2 {
		t.Fatal("no slot with keys")
	}
	half, importOnly := full[0], full[1]
	dstN.Do("CLUSTER", "SETSLOT", half, "IMPORTING", src.ID)
	srcN.Do("CLUSTER", "SETSLOT", half, "MIGRATING", dst.ID)
	keys := srcN.Do("CLUSTER", "GETKEYSINSLOT", half, 1000).([]any)
	args := []any{"MIGRATE", "127.0.0.1", dstN.Port(), "", 0, 5000, "AUTH", "crash-pw", "KEYS"}
	args = append(args, keys[:len(keys)/2]...)
	srcN.Do(args...)
	dstN.Do("CLUSTER", "SETSLOT", importOnly, "IMPORTING", src.ID)
	if open := openSlots(c.observe(d)); len(open) != 3 {
		t.Fatalf("open slots %v", open)
	}

	res := c.reconcile(d, nil)
	c.assertShape(d, res)
	redistest.Verify(t, c.client(d), ds)
}

// syncReplicas waits until every master's replicas acknowledged all writes.
func syncReplicas(t *testing.T, c *testCluster, shards []string) {
	t.Helper()
	for _, s := range shards {
		if len(c.nodes[s]) > 1 {
			c.nodes[s][0].Do("WAIT", len(c.nodes[s])-1, 10000)
		}
	}
}

// Behaviour 5: a master dies → Redis promotes its replica → the engine waits for the dead node
// (its ID stays known); it comes back with its nodes.conf as a replica of the new master; a
// pod coming back empty joins as a replica and the old ID is forgotten everywhere; a node
// restarting with its nodes.conf on a new address rejoins with the same ID.
func TestFailureHealing(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{Password: "heal"}, Options{})
	all, d := c.form(3, 2)
	ds := redistest.Dataset{Prefix: "h", Keys: 5000}
	redistest.Load(t, c.client(d), ds)
	syncReplicas(t, c, all)

	deadID := c.observe(d).Node("s1-0").ID
	c.nodes["s1"][0].Kill()
	res, err := c.tryReconcile(d, nil, 90*time.Second)
	if !errors.Is(err, ErrNotReady) {
		t.Fatalf("error %v, want ErrNotReady for the dead pod", err)
	}
	if res.View.Node("s1-0").Err == nil {
		t.Fatal("the dead node is not reported unreachable in the view")
	}
	v := c.observe(d)
	promoted := v.Node("s1-1")
	if !promoted.IsMaster() || promoted.OwnSlots().Len() == 0 || res.Shards[1].MasterName != "s1-1" {
		t.Fatalf("replica not promoted: master %q, status %+v", promoted.MasterID(), res.Shards[1])
	}
	// Its address is unreachable: the node is awaited, not forgotten (forgetting would ban
	// its ID for 60 s when it comes back with its nodes.conf).
	for _, n := range v.Nodes {
		if n.Reachable() && n.Lookup(deadID) == nil {
			t.Fatalf("%s forgot the dead master %s while its pod may come back", n.Endpoint.Name, deadID)
		}
	}
	redistest.Verify(t, c.client(d), ds)

	// The process comes back with its nodes.conf: the same ID, now a replica of the
	// promoted node (spec: "Replica election and promotion"), nothing forgotten or reset.
	c.nodes["s1"][0].Restart()
	c.assertShape(d, c.reconcile(d, nil))
	back := c.observe(d).Node("s1-0")
	if back.ID != deadID || back.MasterID() != promoted.ID {
		t.Fatalf("restarted node %s follows %q, want ID %s following %s", back.ID, back.MasterID(), deadID, promoted.ID)
	}

	// The pod comes back with an empty volume: a new node ID on the same address; the old
	// ID, no longer awaited, is forgotten everywhere.
	c.nodes["s1"][0].Kill()
	c.nodes["s1"][0].Wipe()
	c.nodes["s1"][0].Restart()
	res = c.reconcile(d, nil)
	c.assertShape(d, res)
	v = c.observe(d)
	fresh := v.Node("s1-0")
	if fresh.ID == deadID || fresh.MasterID() != promoted.ID || fresh.OwnSlots().Len() != 0 {
		t.Fatalf("fresh node %s: master %q, %d slots", fresh.ID, fresh.MasterID(), fresh.OwnSlots().Len())
	}
	for _, n := range v.Nodes {
		if n.Reachable() && n.Lookup(deadID) != nil {
			t.Fatalf("%s still knows the wiped node's old ID %s", n.Endpoint.Name, deadID)
		}
	}

	// A replica restarts with its nodes.conf on a new port.
	rep := c.nodes["s2"][1]
	repID := v.Node("s2-1").ID
	rep.Stop()
	rep.RestartOnNewPort()
	d = c.desired(1, all)
	c.assertShape(d, c.reconcile(d, nil))
	if got := c.observe(d).Node("s2-1"); got.ID != repID {
		t.Fatalf("restarted replica has ID %s, want %s", got.ID, repID)
	}
	redistest.Verify(t, c.client(d), ds)
}

// Behaviour 6: every process stops and comes back with its nodes.conf on a new port; the
// engine re-introduces them with CLUSTER MEET and waits: same IDs, all data, state ok.
func TestFullRestart(t *testing.T) {
	c := newTestCluster(t, redistest.Options{}, Options{})
	all, d := c.form(3, 2)
	ds := redistest.Dataset{Prefix: "r", Keys: 10_000, LargeEvery: 500, LargeFields: 200}
	redistest.Load(t, c.client(d), ds)
	syncReplicas(t, c, all)
	ids := nodeIDs(c.observe(d))

	nodes := c.nodesOf(all)
	parallel(nodes, (*redistest.Node).Stop)
	parallel(nodes, (*redistest.Node).RestartOnNewPort)
	d = c.desired(1, all)
	res := c.reconcile(d, nil)
	c.assertShape(d, res)
	sameIDs(t, ids, res)
	redistest.Verify(t, c.client(d), ds)
}

// Behaviour 6b: as 6, but every node comes back on a new IP address, as pods do, and a
// replica learns its master's new address by gossip before the master's own ping reaches
// it. Redis 7.0.15 then moves the address in the replica's table but not its replication
// (INFO replication keeps the old master_host; the link stays down for good). The test
// builds that order with a cut between s0's two nodes while a third node meets everyone,
// checks Redis left the replica on the old address, and expects the engine to re-attach
// it (CLUSTER REPLICATE) so every link is up.
func TestFullRestartNewAddresses(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{OwnAddress: true}, Options{})
	all, d := c.form(3, 2)
	ds := redistest.Dataset{Prefix: "a", Keys: 5000}
	redistest.Load(t, c.client(d), ds)
	syncReplicas(t, c, all)
	ids := nodeIDs(c.observe(d))
	master, replica := c.nodes["s0"][0], c.nodes["s0"][1]
	oldMasterAddr := master.Addr()

	nodes := c.nodesOf(all)
	parallel(nodes, (*redistest.Node).Stop)
	parallel(nodes, (*redistest.Node).RestartOnNewAddress)
	heal := redistest.Cut(t, master, replica)
	anchor := c.nodes["s1"][0]
	for _, n := range nodes {
		if n != anchor {
			anchor.Do("CLUSTER", "MEET", n.IP(), n.Port())
		}
	}
	knowsAt := func(on, target *redistest.Node, id string) bool {
		table, _ := on.Do("CLUSTER", "NODES").(string)
		return strings.Contains(table, id+" "+target.Addr()+"@")
	}
	waitFor(t, 30*time.Second, "s0's nodes learn each other's new address by gossip", func() bool {
		return knowsAt(replica, master, ids["s0-0"]) && knowsAt(master, replica, ids["s0-1"])
	})
	heal()
	time.Sleep(3 * time.Second) // a few cluster-bus pings between the two
	info, _ := replica.Do("INFO", "replication").(string)
	if !strings.Contains(info, "master_host:"+strings.Split(oldMasterAddr, ":")[0]+"\r\n") {
		t.Fatalf("Redis re-pointed the replica by itself; the state under test was not built:\n%s", info)
	}

	d = c.desired(1, all)
	res := c.reconcile(d, nil)
	c.assertShape(d, res)
	sameIDs(t, ids, res)
	redistest.Verify(t, c.client(d), ds)
}

// nodesOf lists the nodes of the named shards, shard by shard.
func (c *testCluster) nodesOf(shards []string) []*redistest.Node {
	var nodes []*redistest.Node
	for _, s := range shards {
		nodes = append(nodes, c.nodes[s]...)
	}
	return nodes
}

// nodeIDs maps each endpoint name of view to its node ID.
func nodeIDs(view *ClusterView) map[string]string {
	ids := map[string]string{}
	for _, n := range view.Nodes {
		ids[n.Endpoint.Name] = n.ID
	}
	return ids
}

// sameIDs fails t unless every node of res came back with the node ID ids names for it
// (no node was reset or re-created).
func sameIDs(t *testing.T, ids map[string]string, res *Result) {
	t.Helper()
	for _, n := range res.View.Nodes {
		if ids[n.Endpoint.Name] != n.ID {
			t.Fatalf("%s came back as %s, was %s", n.Endpoint.Name, n.ID, ids[n.Endpoint.Name])
		}
	}
}

func parallel(nodes []*redistest.Node, f func(*redistest.Node)) {
	done := make(chan struct{})
	for _, n := range nodes {
		go func() {
			f(n)
			done <- struct{}{}
		}()
	}
	for range nodes {
		<-done
	}
}

// Behaviour 7: planned failover of a chosen replica; a planned failover whose master is dead
// is refused (ErrNotReady) and Redis promotes the replica by itself.
func TestPlannedFailover(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{}, Options{})
	all, d := c.form(3, 2)
	ds := redistest.Dataset{Prefix: "p", Keys: 5000}
	redistest.Load(t, c.client(d), ds)
	syncReplicas(t, c, all)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if err := c.engine.Failover(ctx, d, "s1", "s1-1"); err != nil {
		t.Fatal(err)
	}
	v := c.observe(d)
	newM, oldM := v.Node("s1-1"), v.Node("s1-0")
	if !newM.IsMaster() || newM.OwnSlots().Len() == 0 || oldM.MasterID() != newM.ID {
		t.Fatalf("after failover: s1-1 master=%v slots=%d, s1-0 follows %q", newM.IsMaster(), newM.OwnSlots().Len(), oldM.MasterID())
	}
	if err := c.engine.Failover(ctx, d, "s1", "s1-1"); err != nil {
		t.Fatalf("second call: %v", err)
	}
	redistest.Verify(t, c.client(d), ds)
	c.assertShape(d, c.reconcile(d, nil))

	if err := c.engine.Failover(ctx, d, "s0", "s0-0"); err != nil {
		t.Fatalf("failing over to the current master is a no-op: %v", err)
	}
	if err := c.engine.Failover(ctx, d, "s0", "s1-1"); !errors.Is(err, ErrInvalidDesired) {
		t.Fatalf("node of another shard: %v", err)
	}
	// The master of s2 is gone: a planned failover refuses to force the promotion; Redis's
	// own election (2 of 3 masters alive) promotes the replica.
	c.nodes["s2"][0].Kill()
	if err := c.engine.Failover(ctx, d, "s2", "s2-1"); !errors.Is(err, ErrNotReady) {
		t.Fatalf("failover with the master gone: %v, want ErrNotReady", err)
	}
	waitFor(t, time.Minute, "Redis to promote s2-1", func() bool {
		n := c.observe(d).Node("s2-1")
		return n.IsMaster() && n.OwnSlots().Len() > 0
	})
	redistest.Verify(t, c.client(d), ds)
}

// Behaviour 8: a shard loses its master and its data; without AllowDataLoss the engine
// only reports it; with it, the slots go to the shard's fresh master and the other shards
// keep their data.
func TestLostShard(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{}, Options{})
	_, d := c.form(3, 1)
	ds := redistest.Dataset{Prefix: "l", Keys: 5000}
	redistest.Load(t, c.client(d), ds)
	v := c.observe(d)
	dead := v.Node("s2-0")
	deadSlots := dead.OwnSlots()

	dn := c.nodes["s2"][0]
	dn.Kill()
	dn.Wipe()
	dn.Restart()
	res, err := c.tryReconcile(d, nil, time.Minute)
	if !errors.Is(err, ErrShardLost) || res.DataLoss == nil {
		for _, n := range res.View.Nodes {
			t.Logf("%s: err %v, %d known", n.Endpoint.Name, n.Err, len(n.Known))
		}
		t.Fatalf("error %v, DataLoss %+v; want ErrShardLost", err, res.DataLoss)
	}
	if res.DataLoss.SlotCount != deadSlots.Len() || res.DataLoss.NodeIDs[0] != dead.ID || res.DataLoss.Shards[0] != "s2" {
		t.Fatalf("DataLoss %+v", res.DataLoss)
	}
	// Nothing destructive: the dead owner still holds its slots in every table.
	v = c.observe(d)
	for _, name := range []string{"s0-0", "s1-0"} {
		r := v.Node(name).Lookup(dead.ID)
		if r == nil || r.SlotCount() != deadSlots.Len() {
			t.Fatalf("%s lost track of the dead owner: %+v", name, r)
		}
	}
	if v.Node("s2-0").OwnSlots().Len() != 0 {
		t.Fatal("fresh node got slots without AllowDataLoss")
	}

	d.AllowDataLoss = true
	c.assertShape(d, c.reconcile(d, nil))
	cc := c.client(d)
	ctx := context.Background()
	lost, kept := 0, 0
	for i := range ds.Keys {
		slot := int(c.nodes["s0"][0].Do("CLUSTER", "KEYSLOT", ds.Key(i)).(int64))
		n, err := cc.Exists(ctx, ds.Key(i)).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case deadSlots.Has(slot) && n != 0:
			t.Fatalf("key %s of the lost shard still exists", ds.Key(i))
		case deadSlots.Has(slot):
			lost++
		case n != 1:
			t.Fatalf("key %s of a healthy shard is missing", ds.Key(i))
		default:
			kept++
		}
	}
	if lost == 0 || kept == 0 {
		t.Fatalf("lost %d, kept %d", lost, kept)
	}
}
