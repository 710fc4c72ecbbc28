//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/test/benchtable"
	"github.com/redis-operator/redis-operator/test/clustercost"
)

// appendRows adds rows to the bench table (package benchtable; a no-op without
// $BENCH_TABLE) and marks the benchmark failed if the file cannot be written.
func appendRows(b *testing.B, rows ...benchtable.Row) {
	if err := benchtable.Append(rows...); err != nil {
		b.Error(err)
	}
}

// applyToReadyRows are BenchmarkApplyToReady's rows for one size: the median time to Ready,
// then the median of each earlier stage from apply, where the time goes, and a pod's time
// from bound to a node to Ready (median over every pod of the runs). The targets are the
// real-pods issue's (the plane's nodes are the kubelet with containerd): 3×1 under 6 s,
// and a pod Ready within 2 s of being bound; other sizes have none.
func applyToReadyRows(shards, replicas int32, med readyStages, runs int, podMed time.Duration, pods int) []benchtable.Row {
	const limit = 6 * time.Second
	at := fmt.Sprintf("apply→Ready %d×%d, median of %d", shards, replicas, runs)
	total := benchtable.Row{Measure: at, Ours: fmt.Sprintf("%.1f s", med[stageReady].Seconds())}
	if shards == 3 && replicas == 1 {
		total.Target, total.Met = fmt.Sprintf("< %.0f s", limit.Seconds()), benchtable.Met(med[stageReady] < limit)
	}
	rows := []benchtable.Row{total}
	for i := range stageReady {
		rows = append(rows, benchtable.Row{Measure: fmt.Sprintf("  %s: %s", at, readyStageNames[i]), Ours: fmt.Sprintf("%.1f s", med[i].Seconds())})
	}
	pod := benchtable.Row{Measure: fmt.Sprintf("  %s: a pod bound→Ready (median of %d pods)", at, pods), Ours: fmt.Sprintf("%.1f s", podMed.Seconds())}
	pod.Target, pod.Met = "≤ 2 s", benchtable.Met(podMed <= 2*time.Second)
	return append(rows, pod)
}

// manyClustersRows are BenchmarkManyClusters' rows: per cluster count the operator's RSS
// and idle CPU (targets at 100 clusters, issue 14), its API writes per minute while idle
// (target 0) and its Redis commands per node per resync (target ≤ 2); then what one more
// cluster costs the operator between consecutive counts and that projected to 1000
// clusters (clustercost.Rows, issue 36's targets); then the scale-out of one cluster with
// the others idle against it alone (target ≤ 1.2). A missed target's row says by how much.
func manyClustersRows(rows []benchRow, scale scaleResult) []benchtable.Row {
	var out []benchtable.Row
	for _, r := range rows {
		at := fmt.Sprintf("%d clusters (3×0), one operator: ", r.clusters)
		rss := benchtable.Row{Measure: at + "RSS", Ours: fmt.Sprintf("%.0f MiB", r.rssMiB)}
		cpu := benchtable.Row{Measure: at + "idle CPU", Ours: fmt.Sprintf("%.2f %%", r.cpuPct)}
		if r.clusters >= 100 {
			var met bool
			rss.Ours, met = clustercost.Below(r.rssMiB, 128, 0, "MiB")
			rss.Target, rss.Met = "< 128 MiB", benchtable.Met(met)
			cpu.Ours, met = clustercost.Below(r.cpuPct, 5, 2, "%")
			cpu.Target, cpu.Met = "< 5 %", benchtable.Met(met)
		}
		writes, writesMet := clustercost.AtMost(r.writesPerMin, 0, 1, "")
		cmds, cmdsMet := commandsVerdict(r)
		out = append(out, rss, cpu,
			benchtable.Row{Measure: at + "API writes/min idle", Ours: writes, Target: "0", Met: benchtable.Met(writesMet)},
			benchtable.Row{Measure: at + "Redis commands/node/resync", Ours: cmds, Target: "≤ 2", Met: benchtable.Met(cmdsMet)})
	}
	out = append(out, clustercost.Rows(settledPoints(rows))...)
	if ratio := scale.ratio(); !math.IsNaN(ratio) {
		out = append(out, benchtable.Row{
			Measure: fmt.Sprintf("scale-out 3→4 with %d clusters idle vs alone (medians)", scale.others),
			Ours:    fmt.Sprintf("%.1f s", median(scale.loaded.total).Seconds()), Anchor: fmt.Sprintf("%.1f s", median(scale.alone.total).Seconds()),
			Ratio: fmt.Sprintf("%.2f", ratio), Target: "≤ 1.2", Met: benchtable.Met(ratio <= 1.2),
		})
	}
	if ratio := scale.afterPodsRatio(); !math.IsNaN(ratio) {
		out = append(out, benchtable.Row{
			Measure: fmt.Sprintf("  the same, after the new shard's pods were Ready (%d idle vs alone)", scale.others),
			Ours:    fmt.Sprintf("%.1f s", median(scale.loaded.afterPods).Seconds()), Anchor: fmt.Sprintf("%.1f s", median(scale.alone.afterPods).Seconds()),
			Ratio: fmt.Sprintf("%.2f", ratio),
		})
	}
	return out
}

// commandsVerdict renders a row's Redis commands per node per resync against the target
// (≤ 2), which the commands per pass that ran must meet too (a starved operator runs fewer
// passes than resyncs); when those miss, the text adds them ("; per pass 2.100: 0.100 over").
func commandsVerdict(r benchRow) (string, bool) {
	text, met := clustercost.AtMost(r.cmdsPerNode, 2, 3, "")
	if perPass, passMet := clustercost.AtMost(r.cmdsPerNodePass, 2, 3, ""); !passMet {
		text += "; per pass " + perPass
		met = false
	}
	return text, met
}

// settledPoints are the rows' settled costs of the operator's process, for clustercost:
// the clusters counted Ready are the fewer of the idle window's two ends.
func settledPoints(rows []benchRow) []clustercost.Settled {
	var out []clustercost.Settled
	for _, r := range rows {
		out = append(out, clustercost.Settled{Clusters: r.clusters, Ready: min(r.readyStart, r.readyEnd), RSSMiB: r.rssMiB, CPUPct: r.cpuPct})
	}
	return out
}

// backupRows are BenchmarkBackupRestore's rows: backup and restore throughput of a 3×1
// cluster's RDBs (mb megabytes), and a writer's p99 during the backup against the same
// writer without one (the anchor: issue 18 asks for a bounded effect on serving nodes).
func backupRows(mb float64, backup, restore time.Duration, idle, during latencies) []benchtable.Row {
	at := fmt.Sprintf("backup 3×1, %.0f MB of RDB, SeaweedFS: ", mb)
	return []benchtable.Row{
		{Measure: at + "backup MB/s (start→manifest)", Ours: fmt.Sprintf("%.1f MB/s", mb/backup.Seconds())},
		{Measure: at + "restore MB/s (apply→Ready)", Ours: fmt.Sprintf("%.1f MB/s", mb/restore.Seconds())},
		{Measure: at + "writer p99 during backup vs without", Ours: fmt.Sprintf("%.2f ms", ms(during.p99)),
			Anchor: fmt.Sprintf("%.2f ms", ms(idle.p99)), Ratio: benchtable.Ratio(ms(during.p99), ms(idle.p99))},
	}
}
