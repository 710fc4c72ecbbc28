package kustomize

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// components returns the names of the embedded components.
func components(t *testing.T) []string {
	t.Helper()
	entries, err := manifests.ReadDir("components")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

// argocdCM stands in for Argo CD's own argocd-cm, which the argocd
// component patches and which an Argo CD install provides.
const argocdCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  namespace: argocd
data:
  url: https://argocd.example.com
`

// renderComponent renders the base with the one component name, the way
// an overlay would (namespace and labels set again for the component's
// objects), from the embedded manifests.
func renderComponent(t *testing.T, name string) []*unstructured.Unstructured {
	t.Helper()
	mem, err := memFS()
	if err != nil {
		t.Fatal(err)
	}
	dir := "/test-component-" + name
	resources := []string{"../base"}
	if name == "argocd" {
		if err := mem.WriteFile(path.Join(dir, "argocd-cm.yaml"), []byte(argocdCM)); err != nil {
			t.Fatal(err)
		}
		resources = append(resources, "argocd-cm.yaml")
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
labels:
- pairs:
    app.kubernetes.io/part-of: redis-operator
    app.kubernetes.io/managed-by: kustomize
resources: [%s]
components: [../components/%s]
`, namespace, strings.Join(resources, ", "), name)
	if err := mem.WriteFile(path.Join(dir, "kustomization.yaml"), []byte(k)); err != nil {
		t.Fatal(err)
	}
	m, err := Build(mem, dir)
	if err != nil {
		t.Fatal(err)
	}
	return objectsOf(t, m)
}

// TestComponentsRender: every component renders on the base alone, adds
// or changes something, and the ones the issue names are there.
func TestComponentsRender(t *testing.T) {
	names := components(t)
	for _, want := range []string{"argocd", "high-availability", "network-policy", "prometheus"} {
		if !slices.Contains(names, want) {
			t.Errorf("no component %s (have %v)", want, names)
		}
	}
	base, err := Build(mustMemFS(t), "/base")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			objs := renderComponent(t, name)
			if len(objs) <= base.Size() && name != "argocd" {
				t.Errorf("%d objects with the component, %d without: it adds nothing", len(objs), base.Size())
			}
			seen := map[string]bool{}
			for _, o := range objs {
				id := fmt.Sprintf("%s/%s/%s", o.GroupVersionKind().GroupKind(), o.GetNamespace(), o.GetName())
				if seen[id] {
					t.Errorf("duplicate object %s", id)
				}
				seen[id] = true
			}
			if name == "argocd" {
				cm := find(t, objs, "ConfigMap", "argocd-cm")
				lua, _, _ := unstructured.NestedString(cm.Object, "data", "resource.customizations.health.cache.redis.io_RedisCluster")
				url, _, _ := unstructured.NestedString(cm.Object, "data", "url")
				if !strings.Contains(lua, "return") || url == "" {
					t.Errorf("argocd-cm after the patch: health check %d bytes, url %q", len(lua), url)
				}
			}
		})
	}
}

func mustMemFS(t *testing.T) filesys.FileSystem {
	t.Helper()
	mem, err := memFS()
	if err != nil {
		t.Fatal(err)
	}
	return mem
}
