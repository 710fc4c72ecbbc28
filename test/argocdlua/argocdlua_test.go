// Package argocdlua runs the RedisCluster health check through Argo CD's own
// code (github.com/argoproj/argo-cd/v3 v3.2.6), in a module of its own so
// that Argo CD's large dependency tree stays out of the main module:
//
//   - argocd-cm is the patch kustomize/components/argocd installs, generated
//     from health/argocd/health.lua;
//   - Argo CD's settings manager (util/settings) reads its resource
//     customizations from that ConfigMap, as the application controller does;
//   - gitops-engine's health.GetResourceHealth runs each fixture with those
//     overrides through Argo CD's Lua VM (util/lua.ResourceHealthOverrides),
//     the call the application controller makes for every live resource
//     (argo-cd controller/health.go).
//
// Each fixture of health/argocd/health_test.yaml must get its expected status
// and message. The main module's health tests do the same with their own
// gopher-lua runner and the Go assessment.
package argocdlua

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/argoproj/gitops-engine/pkg/health"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	appv1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	argolua "github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
)

const (
	root         = "../.."
	argocdNS     = "argocd"
	configMapKey = "resource.customizations.health.cache.redis.io_RedisCluster"
	overrideKey  = "cache.redis.io/RedisCluster"
)

// overridesFromComponent loads the component's argocd-cm patch as the whole
// argocd-cm and returns the resource overrides Argo CD's settings manager
// reads from it.
func overridesFromComponent(t *testing.T) map[string]appv1.ResourceOverride {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "kustomize", "components", "argocd", "argocd-cm-health.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(data, cm); err != nil {
		t.Fatal(err)
	}
	cm.Namespace = argocdNS
	cm.Labels = map[string]string{"app.kubernetes.io/part-of": "argocd"}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: argocdNS,
		Labels: map[string]string{"app.kubernetes.io/part-of": "argocd"}}}
	mgr := settings.NewSettingsManager(context.Background(), fake.NewClientset(cm, secret), argocdNS)
	overrides, err := mgr.GetResourceOverrides()
	if err != nil {
		t.Fatalf("Argo CD's settings manager rejects argocd-cm: %v", err)
	}
	return overrides
}

func TestArgoCDReadsTheHealthCheckFromArgoCDCM(t *testing.T) {
	overrides := overridesFromComponent(t)
	want, err := os.ReadFile(filepath.Join(root, "health", "argocd", "health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	o, ok := overrides[overrideKey]
	if !ok {
		t.Fatalf("no resource override for %s from argocd-cm key %s; overrides: %v", overrideKey, configMapKey, keys(overrides))
	}
	if o.HealthLua != string(want) {
		t.Errorf("Argo CD's health Lua for %s differs from health/argocd/health.lua", overrideKey)
	}
	if o.UseOpenLibs {
		t.Errorf("useOpenLibs is set; the check must run without Lua's standard libraries")
	}
}

type fixtureTest struct {
	InputPath    string              `json:"inputPath"`
	HealthStatus health.HealthStatus `json:"healthStatus"`
}

func TestArgoCDAssessesEveryFixture(t *testing.T) {
	overrides := argolua.ResourceHealthOverrides(overridesFromComponent(t))
	dir := filepath.Join(root, "health", "argocd")
	data, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Tests []fixtureTest `json:"tests"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Tests) == 0 {
		t.Fatal("health_test.yaml has no tests")
	}
	for _, ft := range file.Tests {
		raw, err := os.ReadFile(filepath.Join(dir, ft.InputPath))
		if err != nil {
			t.Fatal(err)
		}
		// As Argo CD's own health tests load fixtures (YAML, float64
		// numbers) and as live objects arrive from the API server (JSON,
		// int64 numbers).
		asYAML := map[string]any{}
		if err := yaml.Unmarshal(raw, &asYAML); err != nil {
			t.Fatal(err)
		}
		js, err := yaml.YAMLToJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		asLive := &unstructured.Unstructured{}
		if err := asLive.UnmarshalJSON(js); err != nil {
			t.Fatal(err)
		}
		for name, obj := range map[string]*unstructured.Unstructured{"yaml": {Object: asYAML}, "live": asLive} {
			t.Run(ft.InputPath+"/"+name, func(t *testing.T) {
				got, err := health.GetResourceHealth(obj, overrides)
				if err != nil {
					t.Fatal(err)
				}
				if got == nil || *got != ft.HealthStatus {
					t.Errorf("Argo CD: %+v, want %+v", got, ft.HealthStatus)
				}
			})
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
