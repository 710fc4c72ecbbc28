//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/test/benchtable"
)

// unrelatedNS holds the objects of BenchmarkUnrelatedObjects that are not
// the operator's.
const unrelatedNS = "bench-unrelated"

// BenchmarkUnrelatedObjects measures what objects that are not the
// operator's cost it in memory (issue 15: the operator caches only what it
// owns, and the Secrets a spec references are watched by name only). It
// stops the suite's operator, runs its own (startBenchOperator) with one
// small RedisCluster (3 shards × 0 replicas) until it is Ready, and takes
// the median of the operator's VmRSS over E2E_BENCH_WINDOW (default 60s,
// one sample every 2 s); then it creates E2E_BENCH_UNRELATED (default
// 2000) Secrets and as many ConfigMaps, each with 1 KiB of data and no
// label of the operator's, in namespace bench-unrelated, waits the same
// window for the operator's watches to deliver them, and takes the median
// again. The target: RSS with them within 10% of RSS without them (a
// b.Error otherwise). Reported: MiB-rss-before, MiB-rss-after and ratio.
//
//	go test -tags e2e -run '^$' -bench UnrelatedObjects -benchtime 1x -timeout 30m ./test/e2e/
func BenchmarkUnrelatedObjects(b *testing.B) {
	window := envDuration(b, "E2E_BENCH_WINDOW", time.Minute)
	count := envInt(b, "E2E_BENCH_UNRELATED", 2000)
	ctx := context.Background()

	removeOperator(b)
	op := startBenchOperator(b, 30*time.Second)
	const name = "unrelated-001"
	createBenchCluster(b, name)
	b.Cleanup(func() {
		rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: benchNSPrefix + name, Name: name}}
		_ = env.k8s.Delete(ctx, rc)
		_ = env.k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unrelatedNS}})
	})
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ready, notReady := readyClusters(b)
		if ready[name] {
			break
		}
		op.check(b)
		if time.Now().After(deadline) {
			b.Fatalf("RedisCluster %s not Ready after 5 minutes: %s", name, notReady[name])
		}
		time.Sleep(2 * time.Second)
	}

	for b.Loop() {
		before := medianRSS(b, op, window)
		createUnrelated(b, ctx, count)
		after := medianRSS(b, op, window)
		ratio := float64(after) / float64(before)
		fmt.Printf("bench: operator RSS %.1f MiB without, %.1f MiB with %d unrelated Secrets and %d ConfigMaps: ×%.3f (target ≤ ×1.10: %s)\n",
			mib(before), mib(after), count, count, ratio, okMiss(ratio <= 1.10))
		b.ReportMetric(mib(before), "MiB-rss-before")
		b.ReportMetric(mib(after), "MiB-rss-after")
		b.ReportMetric(ratio, "ratio")
		appendRows(b, benchtable.Row{
			Measure: fmt.Sprintf("operator RSS with %d unrelated Secrets and %d ConfigMaps vs without", count, count),
			Ours:    fmt.Sprintf("%.1f MiB", mib(after)), Anchor: fmt.Sprintf("%.1f MiB", mib(before)),
			Ratio: fmt.Sprintf("%.3f", ratio), Target: "≤ 1.10", Met: benchtable.Met(ratio <= 1.10),
		})
		if ratio > 1.10 {
			b.Errorf("RSS grew ×%.3f with unrelated objects, more than the 10%% of issue 15", ratio)
		}
	}
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

// medianRSS samples the operator's VmRSS every 2 s for window and returns
// the median, in bytes.
func medianRSS(b *testing.B, op *benchOperator, window time.Duration) int64 {
	b.Helper()
	var rss []int64
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(2 * time.Second) {
		op.check(b)
		s, err := readProc(op.p.cmd.Process.Pid)
		if err != nil {
			b.Fatalf("reading the operator's /proc: %v", err)
		}
		rss = append(rss, s.rssBytes)
	}
	if len(rss) == 0 {
		b.Fatal("no RSS sample: E2E_BENCH_WINDOW is shorter than 2 s")
	}
	slices.Sort(rss)
	return rss[len(rss)/2]
}

// createUnrelated creates count Secrets and count ConfigMaps in
// unrelatedNS, 1 KiB of data each, 8 at a time.
func createUnrelated(b *testing.B, ctx context.Context, count int) {
	b.Helper()
	if err := ensureNamespace(ctx, unrelatedNS); err != nil {
		b.Fatalf("creating namespace %s: %v", unrelatedNS, err)
	}
	value := strings.Repeat("x", 1024)
	work := make(chan client.Object)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for o := range work {
				if err := env.k8s.Create(ctx, o); err != nil {
					select {
					case errs <- fmt.Errorf("creating %T %s: %w", o, o.GetName(), err):
					default:
					}
				}
			}
		}()
	}
	for i := range count {
		meta := metav1.ObjectMeta{Namespace: unrelatedNS, Name: fmt.Sprintf("unrelated-%04d", i)}
		work <- &corev1.Secret{ObjectMeta: meta, Data: map[string][]byte{"value": []byte(value)}}
		work <- &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"value": value}}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}

// envInt parses the positive integer in the environment variable name.
func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
