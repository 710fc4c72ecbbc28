//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// BenchmarkManyClusters runs many small RedisClusters (3 shards × 0
// replicas, 64Mi claims) under one operator on the local plane and prints,
// per cluster count (E2E_BENCH_COUNTS, default 10,30,100; clusters are
// added, never recreated, from one count to the next, up to 10 being
// created at a time): the operator's RSS (VmRSS), its CPU over an idle
// window once every cluster is Ready (utime+stime, % of one core), the
// reconcile pass duration p50/p99 (controller_runtime_reconcile_time_seconds
// of controller "rediscluster", from the bucket deltas over the window),
// API writes per minute (client-go's rest_client_requests_total, methods
// POST, PUT, PATCH and DELETE), and Redis commands per node per resync
// (the operator's own count, redis_operator_redis_commands_total, which
// TestOnCommandCountsWhatNodesReceive checks against the nodes' INFO
// commandstats; the nodes' own counts would mix in the readiness probes).
// RSS and CPU are the operator's process alone: /proc/<pid>/status and
// /proc/<pid>/stat of the pid it started (the binary itself, no shell
// between), whose utime and stime count its own threads only, not its
// children's (cutime, cstime), and it starts none; the readiness probes
// are exec'd by the plane's nodes and the redis-servers are the plane's,
// so neither is in these figures (the machine's CPU by program is printed
// apart, machineCPU).
// From those, what one more cluster costs the operator between consecutive
// counts ((value at 30 − value at 10) / 20 with the default counts) and that
// of the first two counts projected to 1000 clusters (value at 10 + 990 ×
// it), with issue 36's targets per settled cluster (≤ 1 MiB RSS, ≤ 0.05 % of
// a core; package clustercost).
// Then it scales one cluster 3→4 shards while the others idle, three
// times (three clusters, one after the other), and compares the median
// time to Ready with that of the same scale-out of a cluster alone,
// measured first (three clusters, each created, scaled and deleted alone).
// The targets of issues 14 and 36 are printed next to the values; a missed
// one says by how much.
//
// It stops the suite's operator and runs its own, with metrics on
// 127.0.0.1, the default log level and --resync-period E2E_BENCH_RESYNC
// (default 10s, shorter than the operator's 30 s default so that the window
// holds several resyncs per cluster; the table says which), and Go's pprof
// endpoints on E2E_BENCH_PPROF (an address; none by default); E2E_BENCH_LOG,
// when set, is its log level (e.g. debug, with millisecond timestamps, to see
// where a scale-out's time goes; it costs the idle window some CPU). The idle window
// is E2E_BENCH_WINDOW (default 60s). Growth stops early, with a note, when
// the machine's MemAvailable falls under 1.5 GiB.
//
//	go test -tags e2e -run '^$' -bench ManyClusters -benchtime 1x -timeout 150m ./test/e2e/
func BenchmarkManyClusters(b *testing.B) {
	counts := benchCounts(b)
	window := envDuration(b, "E2E_BENCH_WINDOW", time.Minute)
	resync := envDuration(b, "E2E_BENCH_RESYNC", 10*time.Second)

	removeOperator(b)
	op := startBenchOperator(b, resync)
	f := &fleet{op: op}
	var rows []benchRow
	var notMeasured []string // "<count>: why"
	var scale scaleResult
	b.Cleanup(func() {
		printManyTable(rows, notMeasured, scale, resync, window)
		appendRows(b, manyClustersRows(rows, scale)...)
	})

	scale.alone = f.scaleOutAlone(b)
	fmt.Printf("bench: scale-out 3→4 of one cluster alone: %s; after the new shard's pods were Ready %s\n", fmtRuns(scale.alone.total), fmtRuns(scale.alone.afterPods))
	stopped := ""
	for _, n := range counts {
		if stopped != "" {
			notMeasured = append(notMeasured, fmt.Sprintf("%d: %s", n, stopped))
			continue
		}
		ok := b.Run(strconv.Itoa(n), func(b *testing.B) {
			for b.Loop() {
				if why := f.grow(b, n); why != "" {
					stopped = why
					b.Skip("not measured: " + why)
				}
				row := f.measure(b, resync, window)
				rows = append(rows, row)
				fmt.Println("bench:", row.line())
				b.ReportMetric(row.rssMiB, "MiB-rss")
				b.ReportMetric(row.cpuPct, "%cpu-idle")
				b.ReportMetric(row.p99, "s-pass-p99")
				b.ReportMetric(row.writesPerMin, "writes/min")
				b.ReportMetric(row.cmdsPerNode, "cmds/node/resync")
			}
		})
		if stopped != "" {
			notMeasured = append(notMeasured, fmt.Sprintf("%d: %s", n, stopped))
		}
		if !ok || b.Failed() {
			break
		}
	}
	if len(f.names) > 0 && !b.Failed() {
		b.Run("scaleout", func(b *testing.B) {
			for b.Loop() {
				scale.others = len(f.names) - 1
				ready, _ := readyClusters(b)
				for _, name := range f.names {
					if ready[name] && len(scale.loaded.total) < scaleCount {
						scale.loaded.add(f.scaleOut(b, name))
					}
				}
				b.ReportMetric(scale.ratio(), "ratio")
			}
		})
	}
}

// benchNSPrefix prefixes the namespace of every cluster of the benchmark.
const benchNSPrefix = "bench-"

// operatorGID is the group the benchmarks' operator process runs as (still
// as root), so that its connections can be told apart (`-m owner
// --gid-owner`) from those of the plane's probes, which leave from the host
// too.
const operatorGID = 4711

// benchOperator is the operator process the benchmark runs.
type benchOperator struct {
	p          *process
	metricsURL string
	logPath    string
}

func startBenchOperator(b *testing.B, resync time.Duration) *benchOperator {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatalf("picking a metrics port: %v", err)
	}
	metricsAddr := l.Addr().String()
	_ = l.Close()
	op := &benchOperator{metricsURL: "http://" + metricsAddr + "/metrics", logPath: filepath.Join(env.stateDir, "logs", "operator-bench.log")}
	kubeconfig, err := env.operatorKubeconfig()
	if err != nil {
		b.Fatalf("the benchmark operator's kubeconfig: %v", err)
	}
	args := []string{"--kubeconfig", kubeconfig, "--leader-elect=false", "--webhooks=false",
		"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false", "--health-probe-bind-address=0", "--resync-period=" + resync.String()}
	if addr := os.Getenv("E2E_BENCH_PPROF"); addr != "" {
		args = append(args, "--pprof-bind-address="+addr)
	}
	if level := os.Getenv("E2E_BENCH_LOG"); level != "" {
		args = append(args, "--zap-log-level="+level, "--zap-time-encoding=rfc3339nano")
	}
	op.p, err = startProcessAs(&syscall.Credential{Uid: 0, Gid: operatorGID}, op.logPath, filepath.Join(env.binDir, "redis-operator"), args...)
	if err != nil {
		b.Fatalf("starting the benchmark's operator: %v", err)
	}
	b.Cleanup(func() { op.p.stop(30 * time.Second) })
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := scrape(op.metricsURL); err == nil {
			return op
		} else if time.Now().After(deadline) || op.p.exited() {
			b.Fatalf("the benchmark's operator serves no metrics at %s: %v (log %s)", op.metricsURL, err, op.logPath)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (op *benchOperator) check(b testing.TB) {
	b.Helper()
	if op.p.exited() {
		b.Fatalf("the benchmark's operator exited: %v (log %s)", op.p.err, op.logPath)
	}
}

// fleet is the set of idle clusters, named many-001, many-002, ... in
// namespaces bench-<name>.
type fleet struct {
	op    *benchOperator
	names []string
}

func benchCluster(t testing.TB, name string) *cluster {
	return &cluster{t: t, ns: benchNSPrefix + name, name: name}
}

// create creates the RedisCluster name: 3 shards × 0 replicas, 64Mi claims
// deleted with it.
func createBenchCluster(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	c := benchCluster(t, name)
	if err := ensureNamespace(ctx, c.ns); err != nil {
		t.Fatalf("creating namespace %s: %v", c.ns, err)
	}
	size := resource.MustParse("64Mi")
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec: cachev1beta1.RedisClusterSpec{
			Shards: 3, ReplicasPerShard: 0, Image: "redis:7.0",
			Storage: cachev1beta1.StorageSpec{Size: &size, DeleteClaimPolicy: cachev1beta1.DeleteClaimDelete},
		},
	}
	if err := env.k8s.Create(ctx, rc); err != nil {
		t.Fatalf("creating RedisCluster %s/%s: %v", c.ns, name, err)
	}
}

// readyClusters lists the benchmark's RedisClusters and says which are
// Ready; the others map to their status summary.
func readyClusters(t testing.TB) (ready map[string]bool, notReady map[string]string) {
	t.Helper()
	var list cachev1beta1.RedisClusterList
	if err := env.k8s.List(context.Background(), &list); err != nil {
		t.Fatalf("listing RedisClusters: %v", err)
	}
	ready, notReady = map[string]bool{}, map[string]string{}
	for i := range list.Items {
		rc := &list.Items[i]
		if !strings.HasPrefix(rc.Namespace, benchNSPrefix) {
			continue
		}
		if isReady(rc) {
			ready[rc.Name] = true
		} else {
			notReady[rc.Name] = statusSummary(rc)
		}
	}
	return ready, notReady
}

// grow creates clusters until there are n, at most 10 not yet Ready at a
// time, and waits until all n are Ready, or, once all exist, until the
// number Ready has not risen for 5 minutes: on an overloaded machine the
// readiness probes (an exec every 5 s per pod) time out and some pods keep
// flapping; the row then says how many were Ready. It returns why the
// count is not measured, having created fewer, when MemAvailable fell
// under 1.5 GiB, when the number Ready stopped rising for 5 minutes before
// all n existed, or after 45 minutes; "" when the row can be measured.
func (f *fleet) grow(b *testing.B, n int) string {
	b.Helper()
	const inFlight, minAvailable, stall = 10, 3 << 29, 5 * time.Minute
	start := time.Now()
	deadline := start.Add(45 * time.Minute)
	best, rose := 0, time.Now()
	for {
		f.op.check(b)
		ready, notReady := readyClusters(b)
		if len(ready) > best {
			best, rose = len(ready), time.Now()
		}
		if len(f.names) >= n && (len(ready) >= n || time.Since(rose) > stall) {
			fmt.Printf("bench: %d of %d clusters Ready (grew in %.0fs; MemAvailable %.1f GiB, load %s)\n",
				len(ready), n, time.Since(start).Seconds(), gib(memAvailable()), loadAvg())
			return ""
		}
		if time.Now().After(deadline) || time.Since(rose) > stall {
			var sample []string
			for name, s := range notReady {
				sample = append(sample, name+": "+s)
				if len(sample) == 3 {
					break
				}
			}
			return fmt.Sprintf("%d of %d clusters created were Ready after %s, none more for %s (load %s); for example %s",
				len(ready), len(f.names), time.Since(start).Round(time.Second), time.Since(rose).Round(time.Second), loadAvg(), strings.Join(sample, " | "))
		}
		for len(f.names) < n && len(f.names)-len(ready) < inFlight {
			if memAvailable() < minAvailable {
				return fmt.Sprintf("MemAvailable %.1f GiB, under 1.5 GiB, at %d clusters", gib(memAvailable()), len(f.names))
			}
			name := fmt.Sprintf("many-%03d", len(f.names)+1)
			createBenchCluster(b, name)
			f.names = append(f.names, name)
		}
		time.Sleep(2 * time.Second)
	}
}

// nodes counts the fleet's Redis pods that have an IP.
func (f *fleet) nodes(b *testing.B) int {
	b.Helper()
	n := 0
	for _, name := range f.names {
		for _, p := range benchCluster(b, name).pods() {
			if p.Status.PodIP != "" {
				n++
			}
		}
	}
	return n
}

// benchRow is one line of the table.
type benchRow struct {
	clusters, nodes       int
	readyStart, readyEnd  int // clusters Ready when the idle window began and ended
	rssMiB, cpuPct        float64
	anonMiB               float64 // RssAnon: RSS without the mapped binary
	machine               string  // where the machine's CPU went in the window (machineCPU)
	p50, p99              float64 // seconds
	wait50, wait99        float64 // seconds a pass waited in the work queue for a worker
	passes                float64 // reconcile passes in the window
	writesPerMin          float64
	writesByMethod        map[string]float64
	cmdsPerNode           float64 // per node per resync
	cmdsByName            commandCalls
	cmdsPerNodePass       float64 // per node per pass that ran: a starved operator runs fewer passes than resyncs
	memAvailGiB           float64
	load                  string
	logLinesPerMin        float64
	changes, eventsInWind string
}

func (r benchRow) line() string {
	return fmt.Sprintf("%d clusters (%d-%d Ready, %d nodes): RSS %.0f MiB (anonymous %.0f MiB), idle CPU %.2f%% of a core, pass p50 %s p99 %s (%0.f passes), API writes %.1f/min %v, Redis commands %.2f per node per resync %s, operator log %.0f lines/min, MemAvailable %.1f GiB, load %s",
		r.clusters, min(r.readyStart, r.readyEnd), max(r.readyStart, r.readyEnd), r.nodes, r.rssMiB, r.anonMiB, r.cpuPct, fmtSeconds(r.p50), fmtSeconds(r.p99), r.passes, r.writesPerMin, r.writesByMethod,
		r.cmdsPerNode, fmtCalls(r.cmdsByName), r.logLinesPerMin, r.memAvailGiB, r.load)
}

var writeMethods = []string{"POST", "PUT", "PATCH", "DELETE"}

// measure lets the fleet settle for two resync periods, then samples over
// the idle window.
func (f *fleet) measure(b *testing.B, resync, window time.Duration) benchRow {
	b.Helper()
	time.Sleep(2 * resync)
	f.op.check(b)
	nodes := f.nodes(b)
	pid := f.op.p.cmd.Process.Pid
	ctrl := map[string]string{"controller": "rediscluster"}

	readyStart, _ := readyClusters(b)
	objBefore := snapshotObjects(b)
	logBefore := logSize(f.op.logPath)
	m0, err := scrape(f.op.metricsURL)
	if err != nil {
		b.Fatal(err)
	}
	p0, err := readProc(pid)
	if err != nil {
		b.Fatal(err)
	}
	mach0, err := readMachine()
	if err != nil {
		b.Fatal(err)
	}
	windowStart := time.Now()
	time.Sleep(window)
	m1, err := scrape(f.op.metricsURL)
	if err != nil {
		b.Fatal(err)
	}
	p1, err := readProc(pid)
	if err != nil {
		b.Fatal(err)
	}
	mach1, err := readMachine()
	if err != nil {
		b.Fatal(err)
	}
	logLines := countLines(f.op.logPath, logBefore)
	changes, events := describeChanges(b, objBefore, snapshotObjects(b), windowStart)
	readyEnd, _ := readyClusters(b)

	row := f.row(m0, m1, p0, p1, resync, ctrl, nodes, logLines, changes, events)
	if row.cmdsByName["cluster|nodes"] == 0 {
		b.Fatalf("the operator counted no CLUSTER NODES in the idle window (redis_operator_redis_commands_total: %v)", row.cmdsByName)
	}
	row.readyStart, row.readyEnd = len(readyStart), len(readyEnd)
	row.machine = machineCPU(mach0, mach1, runtime.NumCPU())
	return row
}

// row computes the table line from the samples at both ends of the
// window (m the operator's metrics, p /proc). Redis commands are the
// operator's own count, redis_operator_redis_commands_total by command,
// divided by the nodes and by the resyncs in the window (resyncsIn). The
// counter covers every cluster the operator reconciles and nodes counts
// the benchmark's only, so another RedisCluster left on the plane would
// inflate the figure (make bench-many runs it alone on a plane of its own).
func (f *fleet) row(m0, m1 []promSample, p0, p1 procSample, resync time.Duration,
	ctrl map[string]string, nodes, logLines int, changes, events string) benchRow {
	elapsed := p1.at.Sub(p0.at)
	row := benchRow{
		clusters: len(f.names), nodes: nodes,
		rssMiB:         float64(p1.rssBytes) / (1 << 20),
		anonMiB:        float64(p1.anonRSS) / (1 << 20),
		cpuPct:         100 * float64(p1.cpuTicks-p0.cpuTicks) / userHZ / elapsed.Seconds(),
		p50:            histogramQuantile(m0, m1, "controller_runtime_reconcile_time_seconds", ctrl, 0.5),
		p99:            histogramQuantile(m0, m1, "controller_runtime_reconcile_time_seconds", ctrl, 0.99),
		wait50:         histogramQuantile(m0, m1, "workqueue_queue_duration_seconds", map[string]string{"name": "rediscluster"}, 0.5),
		wait99:         histogramQuantile(m0, m1, "workqueue_queue_duration_seconds", map[string]string{"name": "rediscluster"}, 0.99),
		passes:         metricSum(m1, "controller_runtime_reconcile_total", ctrl) - metricSum(m0, "controller_runtime_reconcile_total", ctrl),
		writesByMethod: map[string]float64{},
		memAvailGiB:    gib(memAvailable()),
		load:           loadAvg(),
		logLinesPerMin: float64(logLines) / elapsed.Minutes(),
		changes:        changes, eventsInWind: events,
	}
	var writes float64
	for _, m := range writeMethods {
		w := metricSum(m1, "rest_client_requests_total", map[string]string{"method": m}) - metricSum(m0, "rest_client_requests_total", map[string]string{"method": m})
		if w > 0 {
			row.writesByMethod[m] = w
		}
		writes += w
	}
	row.writesPerMin = writes / elapsed.Minutes()

	row.cmdsByName = commandCalls{}
	resyncsPerCluster := resyncsIn(elapsed, resync, row.passes/float64(row.clusters))
	for _, smp := range m1 {
		if smp.name != "redis_operator_redis_commands_total" || nodes == 0 || resyncsPerCluster <= 0 {
			continue
		}
		cmd := smp.labels["command"]
		if n := smp.value - metricSum(m0, smp.name, map[string]string{"command": cmd}); n > 0 {
			row.cmdsByName[cmd] = n / float64(nodes) / resyncsPerCluster
			row.cmdsPerNode += row.cmdsByName[cmd]
		}
	}
	if passesPerCluster := row.passes / float64(row.clusters); passesPerCluster > 0 {
		row.cmdsPerNodePass = row.cmdsPerNode * resyncsPerCluster / passesPerCluster
	}
	return row
}

// resyncsIn is how many resyncs each cluster had in a window of elapsed,
// given the passes each ran in it. controller-runtime draws each informer's
// resync period once, at its start, as --resync-period times a factor in
// [0.9, 1.1) (calculateResyncPeriod, pkg/cache/internal/informers.go), so
// the window holds elapsed/resync resyncs only to within 10%. When the
// passes fall within that band (one resync more or less for the window's
// edges), every pass was a resync and the passes are the count; outside it
// (passes started by events or requeues too, or a starved operator running
// fewer), the nominal elapsed/resync.
func resyncsIn(elapsed, resync time.Duration, passes float64) float64 {
	nominal := elapsed.Seconds() / resync.Seconds()
	if passes >= elapsed.Seconds()/(1.1*resync.Seconds())-1 && passes <= elapsed.Seconds()/(0.9*resync.Seconds())+1 {
		return passes
	}
	return nominal
}
