//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// BenchmarkApplyToReady measures, on the local plane with the operator
// running, the time from creating a RedisCluster to its Ready condition
// for 3 shards × 1 replica and 5 shards × 1 replica. Each iteration creates
// a fresh cluster and deletes it afterwards (untimed). It reports the
// median as s/ready and prints one table line per size:
//
//	go test -tags e2e -run '^$' -bench ApplyToReady -benchtime 3x -timeout 30m ./test/e2e/
func BenchmarkApplyToReady(b *testing.B) {
	for _, shards := range []int32{3, 5} {
		b.Run(fmt.Sprintf("%dx1", shards), func(b *testing.B) {
			var samples []time.Duration
			for b.Loop() {
				name := fmt.Sprintf("bench-%dx1-%d", shards, len(samples))
				start := time.Now()
				c := newCluster(b, name, func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = shards })
				c.poll("Ready", 10*time.Minute, func() (bool, string) {
					rc := c.get()
					return isReady(rc), statusSummary(rc)
				})
				samples = append(samples, time.Since(start))
				b.StopTimer()
				c.obs.stop()
				c.destroy()
				c.waitPodsGone(3 * time.Minute)
				b.StartTimer()
			}
			slices.Sort(samples)
			median := samples[len(samples)/2]
			b.ReportMetric(median.Seconds(), "s/ready")
			var runs []string
			for _, s := range samples {
				runs = append(runs, fmt.Sprintf("%.1fs", s.Seconds()))
			}
			fmt.Printf("bench: apply→Ready %dx1 median %.1fs (runs %s)\n", shards, median.Seconds(), strings.Join(runs, " "))
			appendRows(b, applyToReadyRow(shards, median, len(samples)))
		})
	}
}
