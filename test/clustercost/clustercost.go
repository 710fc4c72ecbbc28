// Package clustercost computes what one more RedisCluster costs the operator, from its
// settled RSS and idle CPU measured at increasing cluster counts (BenchmarkManyClusters in
// test/e2e), and renders it as rows of the bench table (package benchtable) with issue 36's
// targets. It needs no plane, so its tests run with plain `go test`.
package clustercost

import (
	"fmt"
	"strings"

	"github.com/redis-operator/redis-operator/test/benchtable"
)

// The targets for one settled cluster (issue 36), and the count the first marginal cost is
// projected to. The projection's targets are ProjectTo times the per-cluster ones: at
// ProjectTo clusters the operator, its fixed cost included, stays within them per cluster.
const (
	RSSMiBPerCluster = 1.0  // MiB of the operator's RSS
	CPUPctPerCluster = 0.05 // % of one core of the operator's idle CPU
	ProjectTo        = 1000
)

// Settled is the operator's settled cost with Clusters clusters: its RSS and its CPU over
// an idle window, and how many of the clusters were Ready throughout the window.
type Settled struct {
	Clusters, Ready int
	RSSMiB          float64 // VmRSS, MiB
	CPUPct          float64 // utime+stime over the window, % of one core
}

// Marginal is what each cluster added between two measured counts: the difference of the
// values over the difference of the counts.
type Marginal struct {
	From, To Settled
	RSSMiB   float64 // per cluster
	CPUPct   float64 // per cluster
}

// Marginals returns the marginal cost between each two consecutive points, in the order
// given; nil with fewer than two. Points whose counts do not increase are skipped, so every
// marginal divides by a positive number of clusters.
func Marginals(points []Settled) []Marginal {
	var out []Marginal
	for i := 1; i < len(points); i++ {
		a, b := points[i-1], points[i]
		n := float64(b.Clusters - a.Clusters)
		if n <= 0 {
			continue
		}
		out = append(out, Marginal{From: a, To: b, RSSMiB: (b.RSSMiB - a.RSSMiB) / n, CPUPct: (b.CPUPct - a.CPUPct) / n})
	}
	return out
}

// Span names the counts of m, such as "10→30".
func (m Marginal) Span() string { return fmt.Sprintf("%d→%d", m.From.Clusters, m.To.Clusters) }

// Settled reports whether every cluster was Ready at both counts.
func (m Marginal) Settled() bool {
	return m.From.Ready >= m.From.Clusters && m.To.Ready >= m.To.Clusters
}

// Project is the cost at n clusters from the lower count on at m's cost per cluster:
// From + (n − From.Clusters) × m.
func (m Marginal) Project(n int) Settled {
	k := float64(n - m.From.Clusters)
	return Settled{Clusters: n, Ready: n, RSSMiB: m.From.RSSMiB + k*m.RSSMiB, CPUPct: m.From.CPUPct + k*m.CPUPct}
}

// AtMost renders value with prec decimals and unit (none when ""), and reports whether it
// is at most limit; when it is not, the text says by how much, as "1.40 MiB: 0.40 over".
func AtMost(value, limit float64, prec int, unit string) (string, bool) {
	return against(value, limit, value <= limit, prec, unit)
}

// Below is AtMost for a strict bound: met when value < limit.
func Below(value, limit float64, prec int, unit string) (string, bool) {
	return against(value, limit, value < limit, prec, unit)
}

func against(value, limit float64, met bool, prec int, unit string) (string, bool) {
	text := withUnit(fmt.Sprintf("%.*f", prec, value), unit)
	if !met {
		text += fmt.Sprintf(": %.*f over", prec, value-limit)
	}
	return text, met
}

func withUnit(s, unit string) string {
	if unit == "" {
		return s
	}
	return s + " " + unit
}

// Rows are the bench table's rows for points, the operator's settled cost at increasing
// counts: per marginal (Marginals) its RSS and CPU per cluster, the first judged against
// the per-cluster targets (with the default counts, 10→30) and the others shown without;
// then the first projected to ProjectTo clusters, judged against ProjectTo times the
// per-cluster targets. A marginal over a count whose clusters were not all Ready says so in
// its measure. None with fewer than two points.
func Rows(points []Settled) []benchtable.Row {
	ms := Marginals(points)
	if len(ms) == 0 {
		return nil
	}
	var out []benchtable.Row
	for i, m := range ms {
		at := m.Span() + notReady(m)
		rss := benchtable.Row{Measure: "operator RSS per cluster (" + at + ")"}
		cpu := benchtable.Row{Measure: "operator CPU per cluster (" + at + ")"}
		if i == 0 {
			var met bool
			rss.Ours, met = AtMost(m.RSSMiB, RSSMiBPerCluster, 2, "MiB")
			rss.Target, rss.Met = fmt.Sprintf("≤ %g MiB", RSSMiBPerCluster), benchtable.Met(met)
			cpu.Ours, met = AtMost(m.CPUPct, CPUPctPerCluster, 3, "%")
			cpu.Target, cpu.Met = fmt.Sprintf("≤ %g %%", CPUPctPerCluster), benchtable.Met(met)
		} else {
			rss.Ours, cpu.Ours = fmt.Sprintf("%.2f MiB", m.RSSMiB), fmt.Sprintf("%.3f %%", m.CPUPct)
		}
		out = append(out, rss, cpu)
	}
	m := ms[0]
	p := m.Project(ProjectTo)
	from := " (from " + m.Span() + notReady(m) + ")"
	rssLimit, cpuLimit := ProjectTo*RSSMiBPerCluster, ProjectTo*CPUPctPerCluster
	rssText, rssMet := AtMost(p.RSSMiB, rssLimit, 0, "MiB")
	cpuText, cpuMet := AtMost(p.CPUPct, cpuLimit, 1, "%")
	return append(out,
		benchtable.Row{Measure: fmt.Sprintf("projected operator RSS at %d clusters", ProjectTo) + from,
			Ours: rssText, Target: fmt.Sprintf("≤ %g MiB", rssLimit), Met: benchtable.Met(rssMet)},
		benchtable.Row{Measure: fmt.Sprintf("projected operator CPU at %d clusters", ProjectTo) + from,
			Ours: cpuText, Target: fmt.Sprintf("≤ %g %%", cpuLimit), Met: benchtable.Met(cpuMet)})
}

// notReady is ", not all Ready: 28 of 30" for a marginal whose counts were not all Ready
// throughout their windows, naming each such count; "" otherwise.
func notReady(m Marginal) string {
	if m.Settled() {
		return ""
	}
	var parts []string
	for _, s := range []Settled{m.From, m.To} {
		if s.Ready < s.Clusters {
			parts = append(parts, fmt.Sprintf("%d of %d", s.Ready, s.Clusters))
		}
	}
	return ", not all Ready: " + strings.Join(parts, ", ")
}
