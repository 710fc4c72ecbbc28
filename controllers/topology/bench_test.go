package topology

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/benchtable"
	"github.com/redis-operator/redis-operator/test/redistest"
)

// reshard is one benchmarked move: from masters holding keys to masters in all.
type reshard struct{ from, to, keys int }

// name is the sub-benchmark's name, e.g. "3to4-200k".
func (r reshard) name() string { return fmt.Sprintf("%dto%d-%s", r.from, r.to, kilo(r.keys)) }

// label is the table's wording, e.g. "3→4 200k keys".
func (r reshard) label() string { return fmt.Sprintf("%d→%d %s keys", r.from, r.to, kilo(r.keys)) }

func kilo(n int) string {
	if n%1_000_000 == 0 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return fmt.Sprintf("%dk", n/1000)
}

// benchCLI runs redistest.CLI() (redis-cli, or the server's own, REDIS_CLI) and fails the
// benchmark when it exits non-zero.
func benchCLI(b *testing.B, args ...string) string {
	out, err := exec.Command(redistest.CLI(), args...).CombinedOutput()
	if err != nil {
		b.Fatalf("%s %v: %v\n%s", redistest.CLI(), args, err, out)
	}
	return string(out)
}

// cliLabel is the CLI's name for the benchmarks' lines: "redis-cli", "valkey-cli".
func cliLabel() string { return filepath.Base(redistest.CLI()) }

// benchCluster starts r.to redis-servers (redistest.Binary()), forms r.from masters of them
// with the engine, loads ds, then adds the other r.to-r.from servers as empty masters with redis-cli
// --cluster add-node, one at a time (waitJoined: Redis holds a joining master in fail for
// about one node timeout). None of it is timed. It returns the nodes and the
// Desired of the r.from shards.
func benchCluster(b *testing.B, r reshard, ds redistest.Dataset) ([]*redistest.Node, Desired) {
	b.Helper()
	nodes := redistest.Start(b, r.to, redistest.Options{NodeTimeout: 5 * time.Second})
	d := Desired{}
	for i, n := range nodes[:r.from] {
		d.Shards = append(d.Shards, ShardSpec{Name: fmt.Sprintf("s%d", i), Nodes: []Endpoint{{Name: fmt.Sprintf("s%d-0", i), Addr: n.Addr()}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if res, err := New(Options{}).Reconcile(ctx, d, nil); err != nil || !res.Converged {
		b.Fatalf("bootstrap: %v", err)
	}
	redistest.Load(b, redistest.ClusterClient(b, "", nodes[0].Addr()), ds)
	for _, n := range nodes[r.from:] {
		benchCLI(b, "--cluster", "add-node", n.Addr(), nodes[0].Addr())
		waitJoined(b, n, nodes[0])
	}
	return nodes, d
}

// waitJoined waits until n reports cluster_state:ok and redis-cli --cluster check, from
// seed, finds every node agreeing about the configuration: add-node refuses to add another
// node until they do.
func waitJoined(b *testing.B, n, seed *redistest.Node) {
	b.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ok := strings.Contains(benchCLI(b, "-h", n.IP(), "-p", fmt.Sprint(n.Port()), "cluster", "info"), "cluster_state:ok")
		if ok {
			out, err := exec.Command(redistest.CLI(), "--cluster", "check", seed.Addr()).CombinedOutput()
			ok = err == nil && !strings.Contains(string(out), "[ERR]")
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("new node %s not joined after 2 minutes", n.Addr())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// engineReshard adds nodes[len(d.Shards):] as shards to d and runs one Reconcile to them,
// returning its wall time and its last Progress (slots and keys it moved).
func engineReshard(b *testing.B, nodes []*redistest.Node, d Desired) (time.Duration, Progress) {
	b.Helper()
	for i := len(d.Shards); i < len(nodes); i++ {
		d.Shards = append(d.Shards, ShardSpec{Name: fmt.Sprintf("s%d", i), Nodes: []Endpoint{{Name: fmt.Sprintf("s%d-0", i), Addr: nodes[i].Addr()}}})
	}
	var last Progress
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := New(Options{}).Reconcile(ctx, d, func(p Progress) { last = p })
	took := time.Since(start)
	if err != nil || !res.Converged {
		b.Fatalf("engine: %v", err)
	}
	return took, last
}

// cliReshard times redis-cli (redistest.CLI()) --cluster rebalance --cluster-use-empty-masters.
func cliReshard(b *testing.B, nodes []*redistest.Node) time.Duration {
	b.Helper()
	start := time.Now()
	benchCLI(b, "--cluster", "rebalance", nodes[0].Addr(), "--cluster-use-empty-masters")
	return time.Since(start)
}

// reshardRatioTarget and reshardGrowthTarget are issue 20's targets: the engine at most a
// tenth of redis-cli's time, and 1M keys at most 5.5 times 200k keys.
const (
	reshardRatioTarget  = 0.10
	reshardGrowthTarget = 5.5
)

// BenchmarkReshard, on each server of benchServers (the host's Redis 7.0, and Redis 8.0 and
// Valkey 8.1 from make bench-servers; BENCH_SERVERS), runs reshardIdle. Run it with
//
//	go test -run '^$' -bench 'Reshard$' -benchtime 1x -timeout 270m ./controllers/topology/
//
// one server with -bench 'Reshard$/valkey-8.1', one size with -bench 'Reshard$//.*-200k'.
func BenchmarkReshard(b *testing.B) {
	for _, s := range benchServers(b) {
		s.run(b, reshardIdle)
	}
}

// reshardIdle, for each move (3→4 and 4→8 masters at 200 000 and 1 000 000 keys), loads
// the same keys into two identical clusters (benchCluster), then times (a) this engine's
// Reconcile to the new shard count and (b) the server's own CLI's --cluster rebalance
// --cluster-use-empty-masters. Both clusters are verified key by key afterwards. It prints
// both times and the ratio, and appends rows to the bench table (package benchtable),
// named after server ("redis 8.0"): the ratio per move, and per move count the 1M/200k
// growth of each.
func reshardIdle(b *testing.B, server string) {
	type times struct{ ours, theirs time.Duration }
	seen := map[string]times{} // "3to4" → its 200k times
	for _, r := range []reshard{{3, 4, 200_000}, {4, 8, 200_000}, {3, 4, 1_000_000}, {4, 8, 1_000_000}} {
		b.Run(r.name(), func(b *testing.B) {
			ds := redistest.Dataset{Prefix: "bench", Keys: r.keys}
			nodesA, dA := benchCluster(b, r, ds)
			nodesB, _ := benchCluster(b, r, ds)
			b.ResetTimer()
			cpuBefore := serverCPU(b, nodesA)
			ours, last := engineReshard(b, nodesA, dA)
			busiest, busiestNode, cores := cpuShare(cpuBefore, serverCPU(b, nodesA), ours)
			cliBefore := serverCPU(b, nodesB)
			theirs := cliReshard(b, nodesB)
			cliBusiest, _, cliCores := cpuShare(cliBefore, serverCPU(b, nodesB), theirs)
			b.StopTimer()
			redistest.Verify(b, redistest.ClusterClient(b, "", nodesA[0].Addr()), ds)
			redistest.Verify(b, redistest.ClusterClient(b, "", nodesB[0].Addr()), ds)

			ratio := ours.Seconds() / theirs.Seconds()
			fmt.Printf("bench: reshard %s: %s: engine %.2fs (%d slots, %d keys moved), %s rebalance %.2fs, ratio %.2f (target ≤ %.2f); all %d keys verified in both\n",
				server, r.label(), ours.Seconds(), last.SlotsMoved, last.KeysMoved, cliLabel(), theirs.Seconds(), ratio, reshardRatioTarget, r.keys)
			role := "a source"
			if busiestNode >= r.from {
				role = "a new master"
			}
			fmt.Printf("bench: reshard %s: %s: servers' main threads: engine's move %.2f cores in all, the busiest (%s) %.2f of a core; redis-cli's %.2f cores, busiest %.2f\n",
				server, r.label(), cores, role, busiest, cliCores, cliBusiest)
			b.ReportMetric(ours.Seconds(), "engine-s")
			b.ReportMetric(theirs.Seconds(), "redis-cli-s")
			b.ReportMetric(ratio, "ratio")
			rows := []benchtable.Row{{
				Measure: "reshard " + server + ": " + r.label() + ", no load: time (all keys verified)",
				Ours:    fmt.Sprintf("%.2f s", ours.Seconds()), Anchor: fmt.Sprintf("%.2f s", theirs.Seconds()),
				Ratio: fmt.Sprintf("%.2f", ratio), Target: fmt.Sprintf("ratio ≤ %.2f", reshardRatioTarget),
				Met: benchtable.Met(ratio <= reshardRatioTarget),
			}, {
				Measure: "reshard " + server + ": " + r.label() + ", no load: busiest server thread (" + role + "), of a core",
				Ours:    fmt.Sprintf("%.2f", busiest), Anchor: fmt.Sprintf("%.2f", cliBusiest),
			}}
			move := fmt.Sprintf("%dto%d", r.from, r.to)
			if r.keys == 200_000 {
				seen[move] = times{ours, theirs}
			} else if small, ok := seen[move]; ok {
				g, ga := ours.Seconds()/small.ours.Seconds(), theirs.Seconds()/small.theirs.Seconds()
				rows = append(rows, benchtable.Row{
					Measure: fmt.Sprintf("reshard %s: %d→%d, no load: time %s / time 200k", server, r.from, r.to, kilo(r.keys)),
					Ours:    fmt.Sprintf("%.2f×", g), Anchor: fmt.Sprintf("%.2f×", ga),
					Target: fmt.Sprintf("≤ %.1f×", reshardGrowthTarget), Met: benchtable.Met(g <= reshardGrowthTarget),
				})
				fmt.Printf("bench: reshard %s: %d→%d growth %s/200k: engine %.2f×, %s %.2f× (target ≤ %.1f×)\n", server, r.from, r.to, kilo(r.keys), g, cliLabel(), ga, reshardGrowthTarget)
			}
			if err := benchtable.Append(rows...); err != nil {
				b.Fatal(err)
			}
		})
	}
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
