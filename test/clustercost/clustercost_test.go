package clustercost

import (
	"math"
	"testing"

	"github.com/redis-operator/redis-operator/test/benchtable"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// The marginal is the difference over the clusters added, between each two consecutive
// counts; the projection adds (n − lower count) of it to the lower count's value.
func TestMarginalsAndProjection(t *testing.T) {
	points := []Settled{
		{Clusters: 10, Ready: 10, RSSMiB: 80, CPUPct: 1.0},
		{Clusters: 30, Ready: 30, RSSMiB: 92, CPUPct: 1.6},
		{Clusters: 100, Ready: 100, RSSMiB: 134, CPUPct: 4.4},
	}
	ms := Marginals(points)
	if len(ms) != 2 {
		t.Fatalf("marginals: %+v", ms)
	}
	for i, want := range []struct {
		span        string
		rss, cpuPct float64
	}{{"10→30", 0.6, 0.03}, {"30→100", 0.6, 0.04}} {
		if m := ms[i]; m.Span() != want.span || !near(m.RSSMiB, want.rss) || !near(m.CPUPct, want.cpuPct) || !m.Settled() {
			t.Errorf("marginal %d: %s RSS %v CPU %v settled %v, want %s %v %v", i, m.Span(), m.RSSMiB, m.CPUPct, m.Settled(), want.span, want.rss, want.cpuPct)
		}
	}
	// 80 + 990 × 0.6 and 1.0 + 990 × 0.03.
	if p := ms[0].Project(1000); p.Clusters != 1000 || !near(p.RSSMiB, 674) || !near(p.CPUPct, 30.7) {
		t.Errorf("projection to 1000: %+v, want 674 MiB and 30.7 %%", p)
	}
	if got := Marginals(points[:1]); got != nil {
		t.Errorf("one point: %+v, want none", got)
	}
	if got := Marginals([]Settled{{Clusters: 10}, {Clusters: 10}}); got != nil {
		t.Errorf("no clusters added: %+v, want none", got)
	}
}

func TestAtMostAndBelow(t *testing.T) {
	for _, c := range []struct {
		name string
		got  func() (string, bool)
		text string
		met  bool
	}{
		{"within", func() (string, bool) { return AtMost(0.62, 1, 2, "MiB") }, "0.62 MiB", true},
		{"at the limit", func() (string, bool) { return AtMost(2, 2, 3, "") }, "2.000", true},
		{"over", func() (string, bool) { return AtMost(1.4, 1, 1, "MiB") }, "1.4 MiB: 0.4 over", false},
		{"over, no unit", func() (string, bool) { return AtMost(3, 0, 1, "") }, "3.0: 3.0 over", false},
		{"below", func() (string, bool) { return Below(4.2, 5, 2, "%") }, "4.20 %", true},
		{"strict bound reached", func() (string, bool) { return Below(128, 128, 0, "MiB") }, "128 MiB: 0 over", false},
		{"strict bound passed", func() (string, bool) { return Below(150, 128, 0, "MiB") }, "150 MiB: 22 over", false},
	} {
		if text, met := c.got(); text != c.text || met != c.met {
			t.Errorf("%s: %q %v, want %q %v", c.name, text, met, c.text, c.met)
		}
	}
}

// The first marginal is judged and projected; the next is shown without a target; a miss
// says by how much; a count whose clusters were not all Ready is named in the measure.
func TestRows(t *testing.T) {
	rows := Rows([]Settled{
		{Clusters: 10, Ready: 10, RSSMiB: 80, CPUPct: 1.0},
		{Clusters: 30, Ready: 30, RSSMiB: 108, CPUPct: 2.4},
		{Clusters: 100, Ready: 97, RSSMiB: 150, CPUPct: 5.2},
	})
	want := []benchtable.Row{
		{Measure: "operator RSS per cluster (10→30)", Ours: "1.40 MiB: 0.40 over", Target: "≤ 1 MiB", Met: benchtable.Met(false)},
		{Measure: "operator CPU per cluster (10→30)", Ours: "0.070 %: 0.020 over", Target: "≤ 0.05 %", Met: benchtable.Met(false)},
		{Measure: "operator RSS per cluster (30→100, not all Ready: 97 of 100)", Ours: "0.60 MiB"},
		{Measure: "operator CPU per cluster (30→100, not all Ready: 97 of 100)", Ours: "0.040 %"},
		// 80 + 990 × 1.4 = 1466; 1.0 + 990 × 0.07 = 70.3.
		{Measure: "projected operator RSS at 1000 clusters (from 10→30)", Ours: "1466 MiB: 466 over", Target: "≤ 1000 MiB", Met: benchtable.Met(false)},
		{Measure: "projected operator CPU at 1000 clusters (from 10→30)", Ours: "70.3 %: 20.3 over", Target: "≤ 50 %", Met: benchtable.Met(false)},
	}
	check(t, rows, want)

	rows = Rows([]Settled{{Clusters: 10, Ready: 9, RSSMiB: 80, CPUPct: 1.0}, {Clusters: 30, Ready: 30, RSSMiB: 90, CPUPct: 1.2}})
	want = []benchtable.Row{
		{Measure: "operator RSS per cluster (10→30, not all Ready: 9 of 10)", Ours: "0.50 MiB", Target: "≤ 1 MiB", Met: benchtable.Met(true)},
		{Measure: "operator CPU per cluster (10→30, not all Ready: 9 of 10)", Ours: "0.010 %", Target: "≤ 0.05 %", Met: benchtable.Met(true)},
		{Measure: "projected operator RSS at 1000 clusters (from 10→30, not all Ready: 9 of 10)", Ours: "575 MiB", Target: "≤ 1000 MiB", Met: benchtable.Met(true)},
		{Measure: "projected operator CPU at 1000 clusters (from 10→30, not all Ready: 9 of 10)", Ours: "10.9 %", Target: "≤ 50 %", Met: benchtable.Met(true)},
	}
	check(t, rows, want)

	if rows := Rows([]Settled{{Clusters: 10, Ready: 10, RSSMiB: 80}}); rows != nil {
		t.Errorf("one count: %+v, want no rows", rows)
	}
}

func check(t *testing.T, got, want []benchtable.Row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Measure != w.Measure || g.Ours != w.Ours || g.Target != w.Target || (g.Met == nil) != (w.Met == nil) || g.Met != nil && *g.Met != *w.Met {
			t.Errorf("row %d: %+v (met %v), want %+v (met %v)", i, g, deref(g.Met), w, deref(w.Met))
		}
	}
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}
