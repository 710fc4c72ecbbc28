// Package benchtable collects the benchmarks' results into one table. Each benchmark
// appends its rows (one JSON object a line) to the file named by $BENCH_TABLE; `make bench`
// sets it to bin/bench.jsonl, empties it first and prints the table at the end with
// `go run ./hack/benchtable bin/bench.jsonl`. Without $BENCH_TABLE, Append does nothing.
package benchtable

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
)

// EnvFile names the environment variable holding the path of the rows file.
const EnvFile = "BENCH_TABLE"

// Row is one measure: our figure, the anchor's figure measured in the same run (empty when
// there is none), their ratio (ours/anchor, empty without an anchor), the target as text
// and whether it was met. Figures carry their units ("1.77 s", "3 ms").
type Row struct {
	Measure string `json:"measure"`
	Ours    string `json:"ours"`
	Anchor  string `json:"anchor,omitempty"`
	Ratio   string `json:"ratio,omitempty"`
	Target  string `json:"target,omitempty"`
	// Met is nil when the row has no target.
	Met *bool `json:"met,omitempty"`
}

// Met returns a pointer to v, for Row.Met.
func Met(v bool) *bool { return &v }

// Ratio formats ours/anchor with two decimals; "" when anchor is 0.
func Ratio(ours, anchor float64) string {
	if anchor == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", ours/anchor)
}

// Append adds rows to the file named by $BENCH_TABLE, creating it if needed. It does
// nothing when the variable is empty. Errors are the file's open or write errors.
func Append(rows ...Row) error {
	path := os.Getenv(EnvFile)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("benchtable: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			_ = f.Close()
			return fmt.Errorf("benchtable: write %s: %w", path, err)
		}
	}
	return f.Close()
}

// Read returns the rows of a file written by Append, in order. A line that is not a Row
// is an error naming its line number.
func Read(r io.Reader) ([]Row, error) {
	var rows []Row
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var row Row
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, fmt.Errorf("benchtable: line %d: %w", n, err)
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// Render writes rows as one aligned table with the columns
// measure | ours | anchor | ratio | target | met?; empty cells show as "—".
func Render(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	dash := func(s string) string {
		if s == "" {
			return "—"
		}
		return s
	}
	fmt.Fprintln(tw, "measure\tours\tanchor\tratio\ttarget\tmet?")
	for _, r := range rows {
		met := "—"
		if r.Met != nil {
			met = map[bool]string{true: "yes", false: "NO"}[*r.Met]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Measure, dash(r.Ours), dash(r.Anchor), dash(r.Ratio), dash(r.Target), met)
	}
	return tw.Flush()
}
