package topology

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The engine must never wipe a node: no reset, no flush, in any file of the package but
// this one.
func TestSourceNeverResetsOrFlushes(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) < 5 {
		t.Fatalf("%d files: %v", len(files), err)
	}
	banned := []string{"flushall", "flushdb", "cluster reset", `"reset"`, "reset hard", "reset soft"}
	for _, f := range files {
		if f == "source_test.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ToLower(string(b))
		for _, word := range banned {
			if strings.Contains(text, word) {
				t.Errorf("%s contains %q", f, word)
			}
		}
	}
}
