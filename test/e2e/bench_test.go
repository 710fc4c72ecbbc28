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

// BenchmarkApplyToReady measures, on the local plane with the operator running, the time
// from creating a RedisCluster to its Ready condition for 3 shards × 1 replica, 5 × 1 and
// 10 × 2, and where that time goes (readyStages, sampled every 100 ms from the pods and
// from Redis itself). Each iteration creates a fresh cluster and deletes it afterwards
// (untimed). It reports the median as s/ready, prints one line per size with the median
// of each stage, and appends the table's rows:
//
//	go test -tags e2e -run '^$' -bench ApplyToReady -benchtime 3x -timeout 30m ./test/e2e/
func BenchmarkApplyToReady(b *testing.B) {
	for _, size := range []struct{ shards, replicas int32 }{{3, 1}, {5, 1}, {10, 2}} {
		label := fmt.Sprintf("%dx%d", size.shards, size.replicas)
		b.Run(label, func(b *testing.B) {
			var runs []readyStages
			var podReady []time.Duration
			for b.Loop() {
				name := fmt.Sprintf("bench-%dx%d-%d", size.shards, size.replicas, len(runs))
				start := time.Now()
				c := newCluster(b, name, func(rc *cachev1beta1.RedisCluster) {
					rc.Spec.Shards, rc.Spec.ReplicasPerShard = size.shards, size.replicas
				})
				stages, pods := sampleToReady(c, start, int(size.shards), int(size.replicas), 10*time.Minute)
				runs, podReady = append(runs, stages), append(podReady, pods...)
				b.StopTimer()
				c.obs.stop()
				c.destroy()
				c.waitPodsGone(3 * time.Minute)
				b.StartTimer()
			}
			med := medianStages(runs)
			b.ReportMetric(med[len(med)-1].Seconds(), "s/ready")
			var totals []string
			for _, r := range runs {
				totals = append(totals, fmt.Sprintf("%.1fs", r[len(r)-1].Seconds()))
			}
			slices.Sort(podReady)
			podMed := podReady[len(podReady)/2]
			fmt.Printf("bench: apply→Ready %dx%d median %.1fs (runs %s); medians from apply: %s; a pod bound→Ready median %.1fs of %d\n",
				size.shards, size.replicas, med[len(med)-1].Seconds(), strings.Join(totals, " "), med, podMed.Seconds(), len(podReady))
			appendRows(b, applyToReadyRows(size.shards, size.replicas, med, len(runs), podMed, len(podReady))...)
		})
	}
}

// medianStages is, stage by stage, the median over runs.
func medianStages(runs []readyStages) readyStages {
	var out readyStages
	for i := range out {
		var s []time.Duration
		for _, r := range runs {
			s = append(s, r[i])
		}
		slices.Sort(s)
		out[i] = s[len(s)/2]
	}
	return out
}
