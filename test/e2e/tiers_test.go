//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// tierName is a tier of the suite (doc.go, "Tiers"): tierCI exercises every
// capability once and is what `make test` runs; tierAll holds the
// scenarios that only repeat coverage a ci scenario gives, run by `make
// test-e2e-all` (E2E_TIER=all) with everything else.
type tierName string

const (
	tierCI  tierName = "ci"
	tierAll tierName = "all"
)

// runTier is the tier this run selects: E2E_TIER, ci when unset.
var runTier = tierCI

func selectTier() error {
	switch v := os.Getenv("E2E_TIER"); v {
	case "", string(tierCI):
		runTier = tierCI
	case string(tierAll):
		runTier = tierAll
	default:
		return fmt.Errorf("E2E_TIER=%q: want ci (make test's tier, the default) or all (every scenario)", v)
	}
	return nil
}

// declaredTier is a tier(t, ...) declaration in force while its test runs.
type declaredTier struct {
	tier tierName
	// scenarioFailed is set when a scenario under the test printed FAIL,
	// so that the test's own failure is not counted twice.
	scenarioFailed atomic.Bool
}

// declarations holds the declarations of the running tests, by t.Name().
var declarations = struct {
	sync.Mutex
	byName map[string]*declaredTier
}{byName: map[string]*declaredTier{}}

// counts are the run's totals, printed by printSummary when it ends.
var counts struct {
	passed, failed, skipped atomic.Int64
	declared                atomic.Bool // some test declared its tier: tests ran
}

// tier declares t's tier; every top-level test starts with it
// (checkTierDeclarations refuses a run where one does not), and a subtest
// may start with tier(t, tierAll) to leave the ci tier alone. A subtest
// without a declaration has its parent's tier. Outside its tier, t is
// skipped with a line naming the tier and the make target that runs it.
// A test that fails outside any of its scenarios (in a set-up shared by its
// subtests, say) counts as one failure of the summary.
func tier(t *testing.T, want tierName) {
	t.Helper()
	if want != tierCI && want != tierAll {
		t.Fatalf("tier %q: want tierCI or tierAll", want)
	}
	counts.declared.Store(true)
	parent := nearestDeclared(parentName(t.Name()))
	if parent != nil && parent.tier == tierAll && want == tierCI {
		t.Fatalf("%s declares tier ci inside a tier-all test: it would never run in the ci tier", t.Name())
	}
	d := &declaredTier{tier: want}
	declarations.Lock()
	declarations.byName[t.Name()] = d
	declarations.Unlock()
	t.Cleanup(func() {
		declarations.Lock()
		delete(declarations.byName, t.Name())
		declarations.Unlock()
		if t.Failed() && !d.scenarioFailed.Load() {
			counts.failed.Add(1)
			markScenarioFailed(parentName(t.Name()))
			fmt.Printf("e2e: %s FAIL (outside its scenarios)\n", t.Name())
		}
	})
	if want == tierAll && runTier != tierAll {
		counts.skipped.Add(1)
		fmt.Printf("e2e: %s skip (tier all: make test-e2e-all)\n", t.Name())
		t.Skip("tier all: only `make test-e2e-all` (E2E_TIER=all) runs it; make test runs the ci tier (test/e2e/doc.go)")
	}
}

// scenarioTier returns the declaration t runs under (its own or its
// nearest parent's), or nil when it has none.
func scenarioTier(t *testing.T) *declaredTier { return nearestDeclared(t.Name()) }

// scenarioEnded counts a scenario's result.
func scenarioEnded(t *testing.T, result string) {
	switch result {
	case "ok":
		counts.passed.Add(1)
	case "skip":
		counts.skipped.Add(1)
	default:
		counts.failed.Add(1)
		markScenarioFailed(t.Name())
	}
}

// markScenarioFailed records a counted failure on name and every declared
// test above it.
func markScenarioFailed(name string) {
	declarations.Lock()
	defer declarations.Unlock()
	for ; name != ""; name = parentName(name) {
		if d := declarations.byName[name]; d != nil {
			d.scenarioFailed.Store(true)
		}
	}
}

func nearestDeclared(name string) *declaredTier {
	declarations.Lock()
	defer declarations.Unlock()
	for ; name != ""; name = parentName(name) {
		if d := declarations.byName[name]; d != nil {
			return d
		}
	}
	return nil
}

// parentName is the name of the test above name ("" for a top-level test).
func parentName(name string) string {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return ""
	}
	return name[:i]
}

// printSummary prints the run's closing line, which CI reads. failed also
// counts a test that failed outside its scenarios and a failed set-up or
// suite check (extra). Nothing is printed for a run that ran no test and
// failed nothing (a benchmark run: -run '^$').
func printSummary(extraFailed int) {
	failed := counts.failed.Load() + int64(extraFailed)
	if !counts.declared.Load() && failed == 0 {
		return
	}
	fmt.Printf("e2e: %d passed, %d failed, %d skipped (tier %s)\n", counts.passed.Load(), failed, counts.skipped.Load(), runTier)
}

// checkTierDeclarations parses the package's test files in dir and
// returns an error naming every top-level test whose first statement is
// not tier(t, tierCI) or tier(t, tierAll): no test is silently in no tier.
func checkTierDeclarations(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no test files in %s to check the tiers of", dir)
	}
	fset := token.NewFileSet()
	var missing []string
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			if !declaresTier(fn) {
				missing = append(missing, fmt.Sprintf("%s (%s)", fn.Name.Name, fset.Position(fn.Pos())))
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return errors.New("these tests declare no tier; start each with tier(t, tierCI) or tier(t, tierAll) " +
			"(test/e2e/doc.go, Tiers):\n  " + strings.Join(missing, "\n  "))
	}
	return nil
}

// declaresTier reports whether fn(t *testing.T)'s first statement is
// tier(t, tierCI) or tier(t, tierAll).
func declaresTier(fn *ast.FuncDecl) bool {
	params := fn.Type.Params.List
	if len(params) != 1 || len(params[0].Names) != 1 || fn.Body == nil || len(fn.Body.List) == 0 {
		return false
	}
	stmt, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok || len(call.Args) != 2 {
		return false
	}
	name, ok := call.Fun.(*ast.Ident)
	if !ok || name.Name != "tier" {
		return false
	}
	arg, ok := call.Args[0].(*ast.Ident)
	if !ok || arg.Name != params[0].Names[0].Name {
		return false
	}
	level, ok := call.Args[1].(*ast.Ident)
	return ok && (level.Name == "tierCI" || level.Name == "tierAll")
}
