package topology

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// BenchmarkReshard loads the same 200 000 keys into two identical 3-master clusters, adds
// a fourth empty master to each with redis-cli --cluster add-node and waits for
// cluster_state:ok on it (Redis holds a joining master in fail for about one node timeout;
// not timed), then times (a) this engine's Reconcile to 4 shards and (b) redis-cli --cluster
// rebalance --cluster-use-empty-masters. It prints both times and the ratio; both clusters
// are verified key by key afterwards. Run it with
//
//	go test -run '^$' -bench Reshard -benchtime 1x ./controllers/topology/
func BenchmarkReshard(b *testing.B) {
	const keys = 200_000
	ds := redistest.Dataset{Prefix: "bench", Keys: keys}
	ctx := context.Background()
	cli := func(args ...string) string {
		out, err := exec.Command("redis-cli", args...).CombinedOutput()
		if err != nil {
			b.Fatalf("redis-cli %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// setup returns a loaded 3-master cluster plus a joined empty fourth master.
	setup := func() ([]*redistest.Node, Desired) {
		nodes := redistest.Start(b, 4, redistest.Options{NodeTimeout: 5 * time.Second})
		d := Desired{}
		for i, n := range nodes[:3] {
			d.Shards = append(d.Shards, ShardSpec{Name: fmt.Sprintf("s%d", i), Nodes: []Endpoint{{Name: fmt.Sprintf("s%d-0", i), Addr: n.Addr()}}})
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if res, err := New(Options{}).Reconcile(rctx, d, nil); err != nil || !res.Converged {
			b.Fatalf("bootstrap: %v", err)
		}
		redistest.Load(b, redistest.ClusterClient(b, "", nodes[0].Addr()), ds)
		cli("--cluster", "add-node", nodes[3].Addr(), nodes[0].Addr())
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(cli("-p", fmt.Sprint(nodes[3].Port()), "cluster", "info"), "cluster_state:ok") {
			if time.Now().After(deadline) {
				b.Fatal("new node never reported cluster_state:ok")
			}
			time.Sleep(100 * time.Millisecond)
		}
		return nodes, d
	}
	nodesA, dA := setup()
	nodesB, _ := setup()
	b.ResetTimer()

	// (a) the engine.
	dA.Shards = append(dA.Shards, ShardSpec{Name: "s3", Nodes: []Endpoint{{Name: "s3-0", Addr: nodesA[3].Addr()}}})
	var last Progress
	rctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	start := time.Now()
	res, err := New(Options{}).Reconcile(rctx, dA, func(p Progress) { last = p })
	ours := time.Since(start)
	cancel()
	if err != nil || !res.Converged {
		b.Fatalf("engine: %v", err)
	}

	// (b) redis-cli.
	start = time.Now()
	cli("--cluster", "rebalance", nodesB[0].Addr(), "--cluster-use-empty-masters")
	theirs := time.Since(start)
	b.StopTimer()

	redistest.Verify(b, redistest.ClusterClient(b, "", nodesA[0].Addr()), ds)
	redistest.Verify(b, redistest.ClusterClient(b, "", nodesB[0].Addr()), ds)
	ratio := ours.Seconds() / theirs.Seconds()
	fmt.Printf("reshard 3→4 with %d keys: engine %.2fs (%d slots, %d keys moved), redis-cli rebalance %.2fs, ratio %.2f (target ≤ 0.50)\n",
		keys, ours.Seconds(), last.SlotsMoved, last.KeysMoved, theirs.Seconds(), ratio)
	b.ReportMetric(ours.Seconds(), "engine-s")
	b.ReportMetric(theirs.Seconds(), "redis-cli-s")
	b.ReportMetric(ratio, "ratio")
}

// BenchmarkPlanSettled plans a converged 3×1 cluster, what every resync of
// an idle cluster does: observe, assess, find nothing to do. Its
// allocations are what the many-clusters benchmark's idle CPU pays for in
// garbage collection.
//
//	go test -run '^$' -bench PlanSettled -benchmem ./controllers/topology/
func BenchmarkPlanSettled(b *testing.B) {
	s := newSim(b)
	d := Desired{Shards: s.shards("s", 0, 3, 2), ReplicasPerShard: 1}
	s.mustConverge(d)
	d.Formed = true
	view := s.view(d)
	b.ReportAllocs()
	for b.Loop() {
		steps, err := Plan(view, d)
		if err != nil || len(steps) != 0 {
			b.Fatalf("a converged cluster planned %v, %v", steps, err)
		}
	}
}
