package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	argohealth "github.com/argoproj/gitops-engine/pkg/health"
	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/redis-operator/redis-operator/health/argocd"
)

// This file runs argocd/health.lua the way Argo CD v3.2 runs a health check
// from argocd-cm (argo-cd util/lua: VM.runLuaWithResourceActionParameters and
// VM.ExecuteHealthLua), with gopher-lua:
//   - a fresh Lua 5.1 state per run; without useOpenLibs (the argocd-cm
//     default) only the package, base and table libraries are opened, plus a
//     restricted os library that this runner leaves out, so a script that
//     passes here cannot depend on os;
//   - a 1-second context deadline;
//   - the object as the global obj, converted as decodeValue does: bool,
//     float64 and Go integers to numbers, strings and json.Number to strings,
//     slices to arrays, maps to tables, anything else to nil;
//   - the returned table read for status and message; nil or an empty table
//     gives an empty HealthStatus, a status outside gitops-engine's codes
//     gives Unknown with "Lua returned an invalid health status", and any other
//     return value is an error.

// invalidHealthStatus is Argo CD's message for a status outside the known codes.
const invalidHealthStatus = "Lua returned an invalid health status"

// runHealthLua executes script against obj as Argo CD does; openLibs mirrors
// resource.customizations.useOpenLibs.<group>_<kind>.
func runHealthLua(script string, obj *unstructured.Unstructured, openLibs bool) (*argohealth.HealthStatus, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	if openLibs {
		l.OpenLibs()
	} else {
		for _, lib := range []struct {
			name string
			open lua.LGFunction
		}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
			if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
				return nil, fmt.Errorf("opening Lua library %q: %w", lib.name, err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)

	l.SetGlobal("obj", toLua(l, obj.Object))
	if err := l.DoString(script); err != nil {
		return nil, err
	}
	switch ret := l.Get(-1).(type) {
	case *lua.LNilType:
		return &argohealth.HealthStatus{}, nil
	case *lua.LTable:
		if ret.Len() == 0 && isEmptyTable(ret) {
			return &argohealth.HealthStatus{}, nil
		}
		status, err := luaString(ret, "status")
		if err != nil {
			return nil, err
		}
		message, err := luaString(ret, "message")
		if err != nil {
			return nil, err
		}
		hs := &argohealth.HealthStatus{Status: argohealth.HealthStatusCode(status), Message: message}
		switch hs.Status {
		case argohealth.HealthStatusUnknown, argohealth.HealthStatusProgressing, argohealth.HealthStatusSuspended,
			argohealth.HealthStatusHealthy, argohealth.HealthStatusDegraded, argohealth.HealthStatusMissing:
			return hs, nil
		}
		return &argohealth.HealthStatus{Status: argohealth.HealthStatusUnknown, Message: invalidHealthStatus}, nil
	default:
		return nil, fmt.Errorf("expect table output from Lua script, not %s", ret.Type())
	}
}

func isEmptyTable(t *lua.LTable) bool {
	k, _ := t.Next(lua.LNil)
	return k == lua.LNil
}

// luaString reads a string field of the returned table; Argo CD decodes the
// table through JSON into HealthStatus, where a non-string is an error.
func luaString(t *lua.LTable, key string) (string, error) {
	switch v := t.RawGetString(key).(type) {
	case *lua.LNilType:
		return "", nil
	case lua.LString:
		return string(v), nil
	default:
		return "", fmt.Errorf("health table field %s is a %s, not a string", key, v.Type())
	}
}

// toLua converts an unstructured value as Argo CD's decodeValue does.
func toLua(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for key, item := range v {
			t.RawSetH(lua.LString(key), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

// fixtureTest is one entry of health_test.yaml, in Argo CD's layout.
type fixtureTest struct {
	InputPath    string                  `json:"inputPath"`
	HealthStatus argohealth.HealthStatus `json:"healthStatus"`
}

func loadFixtureTests(t *testing.T) []fixtureTest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("argocd", "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []fixtureTest `json:"tests"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		t.Fatalf("argocd/health_test.yaml: %v", err)
	}
	if len(file.Tests) == 0 {
		t.Fatal("argocd/health_test.yaml has no tests")
	}
	return file.Tests
}

// loaders read a fixture in the two forms Argo CD hands it to Lua: parsed
// from YAML as Argo CD's own health tests do (numbers are float64), and
// decoded from JSON as live objects from the API server are (integers are
// int64).
var loaders = map[string]func([]byte) (*unstructured.Unstructured, error){
	"yaml": func(data []byte) (*unstructured.Unstructured, error) {
		obj := map[string]any{}
		if err := yaml.Unmarshal(data, &obj); err != nil {
			return nil, err
		}
		return &unstructured.Unstructured{Object: obj}, nil
	},
	"apiserver": func(data []byte) (*unstructured.Unstructured, error) {
		js, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, err
		}
		obj := &unstructured.Unstructured{}
		return obj, obj.UnmarshalJSON(js)
	},
}

// TestLuaAndGoAgreeOnFixtures is the acceptance test: for every
// fixture in argocd/health_test.yaml, in both object forms and with and
// without Lua's standard libraries, health.lua returns the expected status
// and message, and so does the Go assessment through gitops-engine's
// health.GetResourceHealth.
func TestLuaAndGoAgreeOnFixtures(t *testing.T) {
	for _, ft := range loadFixtureTests(t) {
		data, err := os.ReadFile(filepath.Join("argocd", ft.InputPath))
		if err != nil {
			t.Fatal(err)
		}
		for loaderName, load := range loaders {
			obj, err := load(data)
			if err != nil {
				t.Fatalf("%s: %v", ft.InputPath, err)
			}
			t.Run(ft.InputPath+"/"+loaderName, func(t *testing.T) {
				want := ft.HealthStatus
				goHealth, err := argohealth.GetResourceHealth(obj, Override{})
				if err != nil {
					t.Fatalf("Go assessment: %v", err)
				}
				if *goHealth != want {
					t.Errorf("Go assessment = %+v, want %+v", *goHealth, want)
				}
				for _, openLibs := range []bool{false, true} {
					luaHealth, err := runHealthLua(argocd.HealthLua, obj, openLibs)
					if err != nil {
						t.Fatalf("Lua (openLibs %v): %v", openLibs, err)
					}
					if *luaHealth != want {
						t.Errorf("Lua (openLibs %v) = %+v, want %+v", openLibs, *luaHealth, want)
					}
				}
			})
		}
	}
}

// TestFixturesCoverTheScenarios checks that health_test.yaml lists every file
// in testdata and the scenarios the issue names, and that each fixture is a
// RedisCluster.
func TestFixturesCoverTheScenarios(t *testing.T) {
	tests := loadFixtureTests(t)
	var listed []string
	for _, ft := range tests {
		listed = append(listed, ft.InputPath)
	}
	files, err := filepath.Glob(filepath.Join("argocd", "testdata", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		rel := filepath.ToSlash(strings.TrimPrefix(f, "argocd"+string(filepath.Separator)))
		if !slices.Contains(listed, rel) {
			t.Errorf("%s is not listed in health_test.yaml", rel)
		}
	}
	for _, scenario := range []string{"bootstrapping", "ready", "scaling", "upgrading", "degraded", "paused",
		"stale-generation", "no-status", "rotating-credentials"} {
		if !slices.Contains(listed, "testdata/"+scenario+".yaml") {
			t.Errorf("no fixture for scenario %s", scenario)
		}
	}
	for _, ft := range tests {
		data, err := os.ReadFile(filepath.Join("argocd", ft.InputPath))
		if err != nil {
			t.Fatal(err)
		}
		obj, err := loaders["apiserver"](data)
		if err != nil {
			t.Fatalf("%s: %v", ft.InputPath, err)
		}
		if gk := obj.GroupVersionKind().GroupKind(); gk.Group != "cache.redis.io" || gk.Kind != Kind {
			t.Errorf("%s is a %s, not a RedisCluster", ft.InputPath, gk)
		}
	}
}

// TestRunnerTreatsInvalidStatusAsUnknown checks this file's runner against
// Argo CD's documented handling of what a script returns.
func TestRunnerTreatsInvalidStatusAsUnknown(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"kind": "RedisCluster"}}
	for _, tc := range []struct {
		script string
		want   *argohealth.HealthStatus
	}{
		{`return {status = "Fine", message = "x"}`, &argohealth.HealthStatus{Status: argohealth.HealthStatusUnknown, Message: invalidHealthStatus}},
		{`return {message = "no status"}`, &argohealth.HealthStatus{Status: argohealth.HealthStatusUnknown, Message: invalidHealthStatus}},
		{`return {}`, &argohealth.HealthStatus{}},
		{`return nil`, &argohealth.HealthStatus{}},
		{`return {status = obj.kind == "RedisCluster" and "Healthy" or "Degraded"}`, &argohealth.HealthStatus{Status: argohealth.HealthStatusHealthy}},
	} {
		got, err := runHealthLua(tc.script, obj, false)
		if err != nil {
			t.Fatalf("%s: %v", tc.script, err)
		}
		if *got != *tc.want {
			t.Errorf("%s = %+v, want %+v", tc.script, *got, *tc.want)
		}
	}
	if _, err := runHealthLua(`return "Healthy"`, obj, false); err == nil {
		t.Error("a string return value is accepted; Argo CD rejects anything but a table")
	}
}

// TestRunnerWithoutOpenLibsHasNoStringLibrary proves the restricted mode is
// restricted: a script calling string.format fails there, as it does in an
// argocd-cm check without useOpenLibs, and works with the libraries open.
func TestRunnerWithoutOpenLibsHasNoStringLibrary(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	script := `return {status = "Healthy", message = string.format("%d", 1)}`
	var apiErr *lua.ApiError
	if _, err := runHealthLua(script, obj, false); !errors.As(err, &apiErr) {
		t.Errorf("string.format without open libraries: err = %v, want a Lua runtime error", err)
	}
	if _, err := runHealthLua(script, obj, true); err != nil {
		t.Errorf("string.format with open libraries: %v", err)
	}
}
