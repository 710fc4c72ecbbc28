package benchtable

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Rows appended by two benchmarks come back in order and render as one table with
// "—" for empty cells and yes/NO for targets.
func TestAppendReadRender(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	t.Setenv(EnvFile, path)
	if err := Append(Row{Measure: "reshard", Ours: "1.00 s", Anchor: "4.00 s", Ratio: Ratio(1, 4), Target: "≤ 0.10", Met: Met(false)}); err != nil {
		t.Fatal(err)
	}
	if err := Append(Row{Measure: "apply→Ready", Ours: "7.0 s", Target: "< 8 s", Met: Met(true)}, Row{Measure: "RSS", Ours: "80 MiB"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	rows, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || rows[0].Ratio != "0.25" || rows[2].Met != nil {
		t.Fatalf("rows read back: %+v", rows)
	}
	var out strings.Builder
	if err := Render(&out, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := [][]string{
		{"measure", "ours", "anchor", "ratio", "target", "met?"},
		{"reshard", "1.00 s", "4.00 s", "0.25", "≤ 0.10", "NO"},
		{"apply→Ready", "7.0 s", "—", "—", "< 8 s", "yes"},
		{"RSS", "80 MiB", "—", "—", "—", "—"},
	}
	if len(lines) != len(want) {
		t.Fatalf("table:\n%s", out.String())
	}
	for i, w := range want {
		// Cells are separated by at least two spaces (Render's padding).
		if got := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(lines[i]), -1); strings.Join(got, "|") != strings.Join(w, "|") {
			t.Errorf("line %d: %q, want cells %q", i, lines[i], w)
		}
	}
}

// Without $BENCH_TABLE, Append writes nothing.
func TestAppendWithoutFile(t *testing.T) {
	t.Setenv(EnvFile, "")
	if err := Append(Row{Measure: "x"}); err != nil {
		t.Fatal(err)
	}
}
