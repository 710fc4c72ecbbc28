package argocd

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = "../.."

var componentDir = filepath.Join(repoRoot, "kustomize", "components", "argocd")

// render runs kustomize (krusty, default options: load restrictions to the
// kustomization root, no plugins) on dir and returns the objects.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		// Through JSON, so numbers are int64 as from the API server.
		js, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(js); err != nil {
			t.Fatal(err)
		}
		out = append(out, u)
	}
	return out
}

// TestComponentPatchIsGenerated: the committed patch is what ConfigMapPatch
// makes from health.lua today.
func TestComponentPatchIsGenerated(t *testing.T) {
	committed, err := os.ReadFile(filepath.Join(componentDir, "argocd-cm-health.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := ConfigMapPatch()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, want) {
		t.Fatal("kustomize/components/argocd/argocd-cm-health.yaml is stale: run `go generate ./health/argocd`")
	}
}

// argocdCM is argocd-cm as Argo CD v3.2.6 ships it (manifests/base/config),
// with one of its data keys.
const argocdCM = `apiVersion: v1
kind: ConfigMap
metadata:
  name: argocd-cm
  labels:
    app.kubernetes.io/name: argocd-cm
    app.kubernetes.io/part-of: argocd
data:
  resource.customizations.ignoreResourceUpdates.all: |
    jsonPointers:
      - /status
`

// TestComponentInstallsHealthLua renders the component into an Argo CD
// install, the way users add it, and finds health.lua byte for byte under
// the argocd-cm key, with the ConfigMap's other keys and labels intact.
func TestComponentInstallsHealthLua(t *testing.T) {
	component, err := filepath.Abs(componentDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, namespace := range []string{"", "argocd"} {
		dir := t.TempDir()
		// kustomize takes components by relative path only.
		rel, err := filepath.Rel(dir, component)
		if err != nil {
			t.Fatal(err)
		}
		kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
		if namespace != "" {
			kustomization += "namespace: " + namespace + "\n"
		}
		kustomization += "resources:\n- argocd-cm.yaml\ncomponents:\n- " + filepath.ToSlash(rel) + "\n"
		for name, content := range map[string]string{"kustomization.yaml": kustomization, "argocd-cm.yaml": argocdCM} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}

		objs := render(t, dir)
		if len(objs) != 1 {
			t.Fatalf("namespace %q: %d objects, want argocd-cm only", namespace, len(objs))
		}
		cm := objs[0]
		if cm.GetKind() != "ConfigMap" || cm.GetName() != ConfigMapName || cm.GetNamespace() != namespace {
			t.Fatalf("rendered %s %s/%s, want ConfigMap %s/%s", cm.GetKind(), cm.GetNamespace(), cm.GetName(), namespace, ConfigMapName)
		}
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		if data[ConfigMapKey] != HealthLua {
			t.Errorf("namespace %q: argocd-cm %s is not health.lua:\n%s", namespace, ConfigMapKey, data[ConfigMapKey])
		}
		if data["resource.customizations.ignoreResourceUpdates.all"] != "jsonPointers:\n  - /status\n" {
			t.Errorf("namespace %q: the patch lost argocd-cm's other keys: %v", namespace, data)
		}
		if cm.GetLabels()["app.kubernetes.io/part-of"] != "argocd" {
			t.Errorf("namespace %q: the patch lost argocd-cm's labels: %v", namespace, cm.GetLabels())
		}
	}
}
