package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/status"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

func ids(n string) string { return n + "000000000000000000000000000000000000000"[:40-len(n)] }

// When announceWork looks before the engine runs: the shard count in
// status differs from spec's, or a shard is leaving.
func TestShardCountChanging(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 2}, Spec: cachev1beta1.RedisClusterSpec{Shards: 8}}
	rc.Status.ObservedGeneration = 1
	rc.Status.CurrentShards = 3
	if !shardCountChanging(rc, &status.Observation{}) {
		t.Fatal("3 shards counted, 8 wanted: announceWork would not look")
	}

	settled := &cachev1beta1.RedisCluster{Spec: cachev1beta1.RedisClusterSpec{Shards: 3}}
	settled.Status.CurrentShards = 3
	if shardCountChanging(settled, &status.Observation{}) {
		t.Error("a settled cluster would be observed twice per pass")
	}
	if !shardCountChanging(settled, &status.Observation{Leaving: []string{"c-shard-3"}}) {
		t.Error("a leaving shard is scaling")
	}
}

// A migration spans passes (each bounded by PassBudget): status.migration
// counts from the migration's start, not from the pass's.
func TestMigrationProgressSpansPasses(t *testing.T) {
	first := &progressReporter{last: topology.Progress{SlotsMoved: 100, SlotsTotal: 4096, KeysMoved: 5000}}
	m := first.migration()
	if m.SlotsMoved != 100 || m.SlotsTotal != 4096 || m.KeysMoved != 5000 {
		t.Fatalf("first pass: %+v", m)
	}
	// The next pass plans the 3996 slots left.
	next := &progressReporter{before: m, last: topology.Progress{SlotsMoved: 96, SlotsTotal: 3996, KeysMoved: 4000}}
	if m := next.migration(); m.SlotsMoved != 196 || m.SlotsTotal != 4096 || m.KeysMoved != 9000 {
		t.Fatalf("second pass: %+v, want 196 of 4096 slots, 9000 keys", m)
	}
	// A finished migration does not carry into a new one.
	done := &cachev1beta1.MigrationStatus{SlotsMoved: 4096, SlotsTotal: 4096, KeysMoved: 200000}
	fresh := &progressReporter{before: done, last: topology.Progress{SlotsMoved: 10, SlotsTotal: 2048, KeysMoved: 30}}
	if m := fresh.migration(); m.SlotsMoved != 10 || m.SlotsTotal != 2048 || m.KeysMoved != 30 {
		t.Fatalf("new migration: %+v", m)
	}
	if (&progressReporter{before: m}).migration() != nil {
		t.Fatal("a pass that moved nothing reports no migration")
	}
}
