// Package docs holds the guides that are not in the README, and the tests
// that keep them true to the code.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// reasonSources are the files whose string constants named *Reason or
// Reason* are condition reasons the operator writes.
var reasonSources = []string{
	"../apis/cache/v1beta1/conditions.go",
	"../apis/cache/v1beta1/backup_types.go",
	"../apis/cache/v1beta1/scheduledbackup_types.go",
	"../controllers/credentials/credential.go",
}

// eventCall matches the operator's event calls with a literal reason:
// scope.did/failed/normal/warning("Reason", ...) and
// Recorder.Eventf(obj, type, "Reason", ...), the type a corev1 constant or
// a literal "Normal"/"Warning".
var eventCall = regexp.MustCompile(`\bs\.(?:did|failed|normal|warning)\("([A-Za-z]+)"|\.Eventf?\([^,]+, corev1\.EventType[A-Za-z]+, "([A-Za-z]+)"|\.Eventf?\([^,]+, "(?:Normal|Warning)", "([A-Za-z]+)"`)

// tableReasons is the first column of a row of one of the guide's tables
// when it names reasons: "| `A` |" or "| `A` / `B` / `C` |".
var (
	tableReasons = regexp.MustCompile("(?m)^\\| (`[A-Za-z]+`(?: / `[A-Za-z]+`)*) \\|")
	quoted       = regexp.MustCompile("`([A-Za-z]+)`")
)

// TestTroubleshootingNamesEveryReason: every condition reason and every
// event reason the operator writes has a row in troubleshooting.md, and
// every row names a reason that exists, so the guide neither misses a
// message nor explains one the operator never prints.
func TestTroubleshootingNamesEveryReason(t *testing.T) {
	raw, err := os.ReadFile("troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range tableReasons.FindAllStringSubmatch(string(raw), -1) {
		for _, r := range quoted.FindAllStringSubmatch(m[1], -1) {
			documented[r[1]] = true
		}
	}

	written := map[string]string{} // reason -> where
	for _, f := range reasonSources {
		for _, r := range reasonConstants(t, f) {
			written[r] = f
		}
	}
	err = filepath.WalkDir("../controllers", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range eventCall.FindAllStringSubmatch(string(src), -1) {
			written[m[1]+m[2]+m[3]] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(written) < 40 {
		t.Fatalf("found only %d reasons in the code; the patterns no longer match it", len(written))
	}

	for _, r := range slices.Sorted(maps.Keys(written)) {
		if !documented[r] {
			t.Errorf("reason %q (%s) has no row in troubleshooting.md", r, written[r])
		}
	}
	for _, r := range slices.Sorted(maps.Keys(documented)) {
		if _, ok := written[r]; !ok {
			t.Errorf("troubleshooting.md explains %q, which the operator never writes", r)
		}
	}
}

// reasonConstants returns the values of the string constants of file
// whose names end in Reason or start with Reason.
func reasonConstants(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			for i, name := range v.Names {
				if !strings.HasSuffix(name.Name, "Reason") && !strings.HasPrefix(name.Name, "Reason") {
					continue
				}
				if i >= len(v.Values) {
					continue
				}
				lit, ok := v.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, s)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no reason constants found", file)
	}
	return out
}
