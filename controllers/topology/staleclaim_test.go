package topology

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// TestRedisKeepsStaleOwnerMark records, on real servers, the Redis behaviour behind the
// known limitation of moveSlots' announce (docs/known-limitations.md): master A gives up a
// slot and pings master C without it while C still names A, so C marks the slot "owner not
// claiming". C is then told the new owner B by CLUSTER SETSLOT NODE. On Redis 7.0.13–7.0.15
// and 7.2.0–7.2.3 C keeps the mark (redis/redis#12564): when the slot later moves to C, a
// ping B sent before its own SETSLOT NODE, read by C after C took the slot, takes the slot
// back to B whatever the config epochs, and C deletes the moved keys. Redis 8.0 and Valkey
// 8.1 keep the slot and the keys. B's late ping is made certain by holding C in DEBUG SLEEP,
// pipelined with its SETSLOT NODE, while B pings it; on a busy machine it is late by chance.
// The test fails when a server behaves otherwise than its version says, so that the
// limitation's list of versions stays true.
func TestRedisKeepsStaleOwnerMark(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, redistest.Options{NodeTimeout: 5 * time.Second,
		Extra: []string{"enable-debug-command yes"}}, Options{})
	_, d := c.form(3, 1)
	a, b, cc := c.node("s0-0"), c.node("s1-0"), c.node("s2-0")
	v := c.observe(d)
	idB, idC := v.Node("s1-0").ID, v.Node("s2-0").ID
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := c.client(d)
	var tag string
	var slot int
	for i := 0; ; i++ {
		tag = fmt.Sprintf("{stale%d}", i)
		if slot = int(cl.ClusterKeySlot(ctx, tag).Val()); v.Node("s0-0").OwnSlots().Has(slot) {
			break
		}
	}
	name, version, err := serverName(fmt.Sprint(cc.Do("INFO", "server")))
	if err != nil {
		t.Fatal(err)
	}
	affected := keepsStaleMark(name, version)
	t.Logf("%s: keeps the mark: %v", version, affected)

	mustOK(t, a.Do("CLUSTER", "SETSLOT", slot, "NODE", idB))
	// Each node pings every other at least every node timeout / 2: A's ping without the
	// slot reaches C.
	time.Sleep(3500 * time.Millisecond)
	mustOK(t, cc.Do("CLUSTER", "SETSLOT", slot, "NODE", idB))
	mustOK(t, b.Do("CLUSTER", "SETSLOT", slot, "NODE", idB))
	kept, owner := importWithLateClaim(t, cl, b, cc, idB, idC, tag, slot)
	if affected && (kept != 0 || owner != idB) {
		t.Errorf("C kept %d keys and names %s the owner; this version was expected to lose them to B (%s): update keepsStaleMark and docs/known-limitations.md", kept, owner, idB)
	}
	if !affected && (kept != staleKeys || owner != idC) {
		t.Errorf("C kept %d of %d keys and names %s the owner, want all and itself (%s): this version keeps the mark; update keepsStaleMark and docs/known-limitations.md", kept, staleKeys, owner, idC)
	}
}

const staleKeys = 10

// importWithLateClaim writes staleKeys keys with tag through B, moves slot from B to C by
// the live resharding order with C held in DEBUG SLEEP before its SETSLOT NODE (B pings it
// meanwhile, still claiming the slot), then finishes on B. It returns the keys C holds in
// the slot a moment later and the owner C's own table gives it.
func importWithLateClaim(t *testing.T, cl *redis.ClusterClient, b, cc *redistest.Node, idB, idC, tag string, slot int) (int, string) {
	t.Helper()
	ctx := context.Background()
	keys := make([]any, staleKeys)
	for i := range keys {
		k := fmt.Sprintf("k%d%s", i, tag)
		keys[i] = k
		if err := cl.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	mustOK(t, cc.Do("CLUSTER", "SETSLOT", slot, "IMPORTING", idB))
	mustOK(t, b.Do("CLUSTER", "SETSLOT", slot, "MIGRATING", idC))
	mustOK(t, b.Do(append([]any{"MIGRATE", cc.IP(), cc.Port(), "", 0, 5000, "KEYS"}, keys...)...))
	pipe := cc.Client().Pipeline()
	pipe.Do(ctx, "DEBUG", "SLEEP", 3)
	pipe.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", idC)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	mustOK(t, b.Do("CLUSTER", "SETSLOT", slot, "NODE", idC))
	time.Sleep(time.Second)
	n, err := cc.Client().ClusterCountKeysInSlot(ctx, slot).Result()
	if err != nil {
		t.Fatal(err)
	}
	return int(n), ownerIn(t, cc, slot)
}

// ownerIn is the node ID n's own CLUSTER NODES gives slot, "" for none.
func ownerIn(t *testing.T, n *redistest.Node, slot int) string {
	t.Helper()
	out, err := n.Client().ClusterNodes(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ParseClusterNodes(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if slotIn(r.Slots, slot) {
			return r.ID
		}
	}
	return ""
}

func mustOK(t *testing.T, reply any) {
	t.Helper()
	if fmt.Sprint(reply) != "OK" {
		t.Fatalf("reply %v, want OK", reply)
	}
}

// keepsStaleMark reports whether a server (serverName's name and version) is a Redis that
// keeps the "owner not claiming" mark across CLUSTER SETSLOT NODE: 7.0.13–7.0.15 and
// 7.2.0–7.2.3 (redis/redis#12344 without #12564). Valkey forked after the fix.
func keepsStaleMark(name, version string) bool {
	patch, _ := strconv.Atoi(version[strings.LastIndex(version, ".")+1:])
	switch name {
	case "redis-7.0":
		return patch >= 13
	case "redis-7.2":
		return patch <= 3
	}
	return false
}
