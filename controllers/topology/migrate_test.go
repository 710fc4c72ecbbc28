package topology

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// tagInSlots finds a hash tag whose slot satisfies ok, asking a node for CLUSTER KEYSLOT.
func tagInSlots(t *testing.T, n *redistest.Node, skip int, ok func(int) bool) (string, int) {
	t.Helper()
	for i := 0; i < 100_000; i++ {
		tag := fmt.Sprintf("{t%d}", i)
		if sl := int(n.Do("CLUSTER", "KEYSLOT", tag).(int64)); ok(sl) {
			if skip == 0 {
				return tag, sl
			}
			skip--
		}
	}
	t.Fatal("no hash tag found")
	return "", 0
}

// asking runs one command on a node after ASKING, on one connection.
func asking(t *testing.T, cl *redis.Client, args ...any) *redis.Cmd {
	t.Helper()
	ctx := context.Background()
	pipe := cl.Pipeline()
	pipe.Do(ctx, "ASKING")
	cmd := pipe.Do(ctx, args...)
	_, _ = pipe.Exec(ctx)
	return cmd
}

// The destination of an interrupted move already holds a key of the slot: with a different
// value the move stops with ErrKeyConflict naming the slot and the key, and neither copy is
// overwritten; with the same value (even in another encoding) the key is finished. Once the
// wrong copy is deleted, the next run finishes the move.
func TestMigrateKeyConflict(t *testing.T) {
	c := newTestCluster(t, redistest.Options{}, Options{})
	_, d := c.form(2, 1)
	v := c.observe(d)
	src := v.Node("s0-0")
	tag, slot := tagInSlots(t, c.nodes["s0"][0], 0, func(s int) bool { return src.OwnSlots().Has(s) })
	differ, same, hash := tag+":differ", tag+":same", tag+":hash"
	cc := c.client(d)
	ctx := context.Background()
	cc.Set(ctx, differ, "source-value", 0)
	cc.Set(ctx, same, "v", 0)
	cc.HSet(ctx, hash, "a", "1", "b", "2")
	for i := range 20 {
		cc.Set(ctx, fmt.Sprintf("%s:n%d", tag, i), i, 0)
	}
	// A half-done move whose destination got its own copies: importing on s1, not yet
	// migrating on s0. The hash is written as a hash table on s1 (a listpack on s0).
	dn := c.nodes["s1"][0]
	dn.Do("CLUSTER", "SETSLOT", slot, "IMPORTING", src.ID)
	dn.Do("CONFIG", "SET", "hash-max-listpack-entries", "0")
	dcl, scl := dn.Client(), c.nodes["s0"][0].Client()
	for _, args := range [][]any{{"SET", differ, "newer-value"}, {"SET", same, "v"}, {"HSET", hash, "a", "1", "b", "2"}} {
		if err := asking(t, dcl, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if enc := asking(t, dcl, "OBJECT", "ENCODING", hash).Val(); enc != "hashtable" {
		t.Fatalf("hash encoding on the destination %v", enc)
	}

	_, err := c.tryReconcile(d, nil, time.Minute)
	if !errors.Is(err, ErrKeyConflict) || !strings.Contains(err.Error(), fmt.Sprintf("slot %d: key %q", slot, differ)) {
		t.Fatalf("error %v, want ErrKeyConflict naming slot %d and key %s", err, slot, differ)
	}
	if got := asking(t, scl, "GET", differ).Val(); got != "source-value" {
		t.Fatalf("source copy %v", got)
	}
	if got := asking(t, dcl, "GET", differ).Val(); got != "newer-value" {
		t.Fatalf("destination copy overwritten: %v", got)
	}
	for _, k := range []string{same, hash, tag + ":n7"} {
		// The migrating source answers ASK for a key it no longer holds.
		if asking(t, dcl, "EXISTS", k).Val() != int64(1) || asking(t, scl, "EXISTS", k).Val() == int64(1) {
			t.Fatalf("key %s was not moved", k)
		}
	}

	asking(t, dcl, "DEL", differ) // the operator decides: the source's value wins
	c.assertShape(d, c.reconcile(d, nil))
	if got, err := cc.Get(ctx, differ).Result(); err != nil || got != "source-value" {
		t.Fatalf("after the move %s = %q %v", differ, got, err)
	}
	if got, err := cc.HGet(ctx, hash, "b").Result(); err != nil || got != "2" {
		t.Fatalf("after the move %s.b = %q %v", hash, got, err)
	}
}

// bigValues writes perTag values of 1 MiB (random, so that RDB compression cannot shrink
// them) under each tag and returns their names.
func bigValues(t *testing.T, cc *redis.ClusterClient, tags []string, perTag int) []string {
	t.Helper()
	base := make([]byte, 1<<20)
	r := rand.New(rand.NewChaCha8([32]byte{1}))
	for i := range base {
		base[i] = byte(r.Uint32())
	}
	var names []string
	ctx := context.Background()
	for _, tag := range tags {
		for i := range perTag {
			k := fmt.Sprintf("%s:big%d", tag, i)
			v := append([]byte(k), base...)
			if err := cc.Set(ctx, k, v, 0).Err(); err != nil {
				t.Fatal(err)
			}
			names = append(names, k)
		}
	}
	return names
}

// failureWatch polls every node's CLUSTER NODES and records any fail? or fail flag.
type failureWatch struct {
	stop, done chan struct{}
	mu         sync.Mutex
	seen       []string
}

func watchFailures(nodes []*redistest.Node) *failureWatch {
	w := &failureWatch{stop: make(chan struct{}), done: make(chan struct{})}
	clients := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = n.Client()
	}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, cl := range clients {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				text, err := cl.ClusterNodes(ctx).Result()
				cancel()
				if err != nil {
					continue
				}
				recs, _ := ParseClusterNodes(text)
				for _, r := range recs {
					if r.Failing() {
						w.mu.Lock()
						w.seen = append(w.seen, fmt.Sprintf("%s flags %s:%d %s", cl.Options().Addr, r.IP, r.Port, r.Flags))
						w.mu.Unlock()
					}
				}
			}
		}
	}()
	return w
}

func (w *failureWatch) finish() []string {
	close(w.stop)
	<-w.done
	return w.seen
}

var electionStat = regexp.MustCompile(`cluster_stats_messages_(auth-req|fail)_received:(\d+)`)

// elections sums, over the nodes, the failure reports (FAIL) and vote requests (auth-req)
// they received (CLUSTER INFO lists only non-zero counters).
func elections(t *testing.T, nodes []*redistest.Node) int {
	sum := 0
	for _, n := range nodes {
		for _, m := range electionStat.FindAllStringSubmatch(n.Do("CLUSTER", "INFO").(string), -1) {
			x, _ := strconv.Atoi(m[2])
			sum += x
		}
	}
	return sum
}

// 1 MiB values, 400 of them in two slots of the first round a source gives away, moved
// under writes with a 3 s node timeout: the byte-bounded MIGRATE chunks never stall the
// source long enough for any node to flag another failing, no election happens, every key
// is there after (the old 200-key batches sent 2 × 200 MiB back to back).
func TestMigrateLargeValuesWithoutFailover(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{NodeTimeout: 3 * time.Second}, Options{})
	all := c.addShards(3, 2)
	d2 := c.desired(1, all[:2])
	c.assertShape(d2, c.reconcile(d2, nil))
	// s0 owns 0-8191 and gives 5462-8191 to the third shard, 64 slots per round.
	first := func(s int) bool { return s >= 5462 && s < 5462+64 }
	tagA, slotA := tagInSlots(t, c.nodes["s0"][0], 0, first)
	tagB, slotB := tagInSlots(t, c.nodes["s0"][0], 1, first)
	names := bigValues(t, c.client(d2), []string{tagA, tagB}, 200)
	syncReplicas(t, c, all[:2])

	var nodes []*redistest.Node
	for _, s := range all {
		nodes = append(nodes, c.nodes[s]...)
	}
	before := elections(t, nodes)
	d3 := c.desired(1, all)
	w := startWriter(t, c, d3, "w")
	fw := watchFailures(nodes)
	res := c.reconcile(d3, nil)
	seen := fw.finish()
	w.finish(t, c, d3)
	if len(seen) > 0 {
		t.Fatalf("nodes flagged failing during the move (%d times), first: %s", len(seen), seen[0])
	}
	if after := elections(t, nodes); after != before {
		t.Fatalf("failure reports or vote requests received during the move: %d -> %d", before, after)
	}
	c.assertShape(d3, res)
	v := c.observe(d3)
	for _, name := range []string{"s0-0", "s1-0"} {
		if !v.Node(name).IsMaster() {
			t.Fatalf("%s is no longer a master: a failover happened", name)
		}
	}
	if s2 := v.Node("s2-0"); !s2.OwnSlots().Has(slotA) || !s2.OwnSlots().Has(slotB) {
		t.Fatalf("slots %d and %d not moved to s2", slotA, slotB)
	}
	cc := c.client(d3)
	for _, k := range names {
		if n, err := cc.StrLen(context.Background(), k).Result(); err != nil || n != int64(len(k)+1<<20) {
			t.Fatalf("key %s after the move: %d bytes, %v", k, n, err)
		}
	}
}

// Cancelling while a round of 1 MiB values is in flight returns within the round: the slot
// whose keys had started to move is finished, the round's slot whose keys had not is rolled
// back to the source, none is left open, every key is readable, and the next run finishes.
// (Before, the whole round ran to its end, up to minutes for large values, ignoring ctx.)
func TestMigrationCancelMidRound(t *testing.T) {
	c := newTestCluster(t, redistest.Options{}, Options{})
	all := c.addShards(3, 1)
	d2 := c.desired(0, all[:2])
	c.assertShape(d2, c.reconcile(d2, nil))
	first := func(s int) bool { return s >= 5462 && s < 5462+64 }
	tagA, slotA := tagInSlots(t, c.nodes["s0"][0], 0, first)
	tagB, slotB := tagInSlots(t, c.nodes["s0"][0], 1, first)
	lo, hi := min(slotA, slotB), max(slotA, slotB)
	names := bigValues(t, c.client(d2), []string{tagA, tagB}, 60)

	d3 := c.desired(0, all)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dst := c.nodes["s2"][0].Client()
	go func() { // cancel as soon as the first keys reached the new master
		for ctx.Err() == nil {
			if n, err := dst.DBSize(ctx).Result(); err == nil && n > 0 {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if _, err := c.engine.Reconcile(ctx, d3, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	v := c.observe(d3)
	if open := openSlots(v); len(open) > 0 {
		t.Fatalf("open slots after cancel: %v", open)
	}
	if !v.Node("s2-0").OwnSlots().Has(lo) || !v.Node("s0-0").OwnSlots().Has(hi) {
		t.Fatalf("after cancel: slot %d (keys moving) owned by s2 %v, slot %d (keys not yet moving) owned by s0 %v",
			lo, v.Node("s2-0").OwnSlots().Has(lo), hi, v.Node("s0-0").OwnSlots().Has(hi))
	}
	cc := c.client(d3)
	check := func() {
		for _, k := range names {
			if n, err := cc.StrLen(context.Background(), k).Result(); err != nil || n != int64(len(k)+1<<20) {
				t.Fatalf("key %s: %d bytes, %v", k, n, err)
			}
		}
	}
	check()
	c.assertShape(d3, c.reconcile(d3, nil))
	check()
}

// TestMigrateEmptyRunsMeetKeys: at the full pace a move counts the source's keys first and
// moves a run of empty slots in one round; here keys sit only in the last slots of each
// source's share (rounds of MigrateSlotsPerRound there), and a writer adds keys all over
// while the slots move, so some land in slots counted empty, in a big round. Every key
// arrives with its value, every acknowledged write is readable, no slot stays open, and the
// cluster has its 3-master shape. (The writer would make the engine take the serving pace;
// MigrateServingOps is raised so that it does not.)
func TestMigrateEmptyRunsMeetKeys(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{}, Options{MigrateServingOps: 1 << 40})
	all := c.addShards(3, 1)
	d2 := c.desired(0, all[:2])
	c.assertShape(d2, c.reconcile(d2, nil))
	v := c.observe(d2)
	cc := c.client(d2)
	ctx := context.Background()
	want := map[string]string{}
	for _, src := range []string{"s0", "s1"} {
		owned := v.Node(src + "-0").OwnSlots()
		slots := owned.Slots()
		last := slots[len(slots)-1]
		// The top 150 slots of the source: the scale-out moves each source's last slots.
		for i := range 15 {
			tag, _ := tagInSlots(t, c.nodes[src][0], i, func(s int) bool { return owned.Has(s) && s > last-150 })
			for j := range 40 {
				k, val := fmt.Sprintf("%s:k%d", tag, j), fmt.Sprintf("%s-%d", src, j)
				if err := cc.Set(ctx, k, val, 0).Err(); err != nil {
					t.Fatal(err)
				}
				want[k] = val
			}
		}
	}

	d3 := c.desired(0, all)
	// A writer that starts with the slot moves (one SET every 2 ms) leaves most slots empty
	// when the move counts them, and writes into big rounds while they run.
	begin, stop, done := make(chan struct{}), make(chan struct{}), make(chan []string)
	var once sync.Once
	go func() {
		var acked []string
		defer func() { done <- acked }()
		select {
		case <-begin:
		case <-stop:
			return
		}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
			k := fmt.Sprintf("during:%d", i)
			if cc.Set(ctx, k, k, 0).Err() == nil {
				acked = append(acked, k)
			}
		}
	}()
	c.assertShape(d3, c.reconcile(d3, func(p Progress) {
		if p.SlotsTotal > 0 {
			once.Do(func() { close(begin) })
		}
	}))
	close(stop)
	acked := <-done
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged during the move")
	}
	for _, k := range acked {
		want[k] = k
	}
	t.Logf("%d writes acknowledged during the move", len(acked))
	if open := openSlots(c.observe(d3)); len(open) > 0 {
		t.Fatalf("open slots: %v", open)
	}
	moved := 0
	dst := c.nodes["s2"][0].Client()
	cc3 := c.client(d3)
	for k, val := range want {
		got, err := cc3.Get(ctx, k).Result()
		if err != nil || got != val {
			t.Fatalf("key %s = %q, %v; want %q", k, got, err, val)
		}
		if dst.Exists(ctx, k).Val() == 1 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatalf("none of the %d keys moved to the new master: they were not in the moved slots", len(want))
	}
	t.Logf("%d of %d keys moved to the new master", moved, len(want))
}
