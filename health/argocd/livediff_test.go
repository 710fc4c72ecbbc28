package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/argoproj/gitops-engine/pkg/diff"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// lastAppliedAnnotation is where client-side apply (kubectl apply, Argo CD's
// default sync) keeps the applied object, the "original" of the three-way diff.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// TestExampleNeedsNoIgnoreDifferences backs the example's promise that its
// Applications need no ignoreDifferences. Every environment's objects go to
// a real kube-apiserver (envtest, binaries from `make tools`) as Argo CD's
// default sync leaves them (client-side apply: the object plus its
// last-applied annotation); the object the API server stores is then
// compared with Git by gitops-engine's own diff (pkg/diff, the version
// Argo CD v3.2 runs), with status ignored as Argo CD v3 does by default.
// Nothing may show as modified: the API server adds schema defaults and its
// own metadata, and Argo CD's diff must leave them alone.
func TestExampleNeedsNoIgnoreDifferences(t *testing.T) {
	ex := renderExample(t)
	c, restConfig := startAPIServer(t)
	ctx := context.Background()

	for _, env := range ex.envs {
		t.Run(env, func(t *testing.T) {
			objs := render(t, filepath.Join(exampleDir, "envs", env))
			// The Application's destination namespace (CreateNamespace=true).
			if err := createIfAbsent(ctx, c, namespaceObject("redis")); err != nil {
				t.Fatal(err)
			}
			// Wave -1: the CRDs, Established before anything uses them.
			var crds []*apiextensionsv1.CustomResourceDefinition
			for _, o := range objs {
				if o.GetKind() == "CustomResourceDefinition" {
					crd := &apiextensionsv1.CustomResourceDefinition{}
					if err := runtime.DefaultUnstructuredConverter.FromUnstructured(clientSideApplied(t, o).Object, crd); err != nil {
						t.Fatal(err)
					}
					crds = append(crds, crd)
				}
			}
			if _, err := envtest.InstallCRDs(restConfig, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
				t.Fatalf("installing the rendered CRDs: %v", err)
			}
			// Namespaces are stored for real: the other objects need them.
			for _, o := range objs {
				if o.GetKind() == "Namespace" {
					if err := createIfAbsent(ctx, c, clientSideApplied(t, o)); err != nil {
						t.Fatal(err)
					}
				}
			}

			for _, want := range objs {
				id := want.GetKind() + " " + want.GetName()
				live := clientSideApplied(t, want)
				switch want.GetKind() {
				case "CustomResourceDefinition", "Namespace":
					if err := c.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
						t.Fatalf("%s: %v", id, err)
					}
				default:
					// What the API server would store; a dry run, so the
					// webhook configuration does not go live here.
					if err := c.Create(ctx, live, client.DryRunAll); err != nil {
						t.Errorf("%s: %v", id, err)
						continue
					}
				}
				res, err := diff.Diff(want.DeepCopy(), live, diff.WithNormalizer(ignoreStatus{}))
				if err != nil {
					t.Fatalf("%s: diff: %v", id, err)
				}
				if res.Modified {
					t.Errorf("Argo CD would show %s OutOfSync:\n%s", id, describeDiff(t, res))
				}
			}
		})
	}

	// The operator puts its CA into the CRD's conversion webhook and the
	// validating webhook configuration at run time; Git leaves caBundle
	// out, so Argo CD's diff ignores it.
	t.Run("operator-injected-ca", func(t *testing.T) {
		ca := "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
		objs := render(t, filepath.Join(exampleDir, "envs", ex.envs[0]))
		var injected int
		for _, want := range objs {
			live := clientSideApplied(t, want)
			switch want.GetKind() {
			case "CustomResourceDefinition":
				if err := c.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
					t.Fatal(err)
				}
				if _, ok, _ := unstructured.NestedMap(live.Object, "spec", "conversion", "webhook", "clientConfig"); !ok {
					continue
				}
				if err := unstructured.SetNestedField(live.Object, ca, "spec", "conversion", "webhook", "clientConfig", "caBundle"); err != nil {
					t.Fatal(err)
				}
			case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
				if err := c.Create(ctx, live, client.DryRunAll); err != nil {
					t.Fatal(err)
				}
				webhooks, _, _ := unstructured.NestedSlice(live.Object, "webhooks")
				for _, w := range webhooks {
					if err := unstructured.SetNestedField(w.(map[string]any), ca, "clientConfig", "caBundle"); err != nil {
						t.Fatal(err)
					}
				}
				if err := unstructured.SetNestedSlice(live.Object, webhooks, "webhooks"); err != nil {
					t.Fatal(err)
				}
			default:
				continue
			}
			injected++
			res, err := diff.Diff(want.DeepCopy(), live, diff.WithNormalizer(ignoreStatus{}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Modified {
				t.Errorf("with the operator's caBundle, Argo CD would show %s %s OutOfSync:\n%s", want.GetKind(), want.GetName(), describeDiff(t, res))
			}
		}
		if injected == 0 {
			t.Fatal("no conversion webhook or webhook configuration rendered")
		}
	})

	// The check can fail: a field the API server changes shows as a diff.
	t.Run("detects-a-change", func(t *testing.T) {
		want := findKind(t, render(t, filepath.Join(exampleDir, "envs", ex.envs[0])), "RedisCluster")
		live := clientSideApplied(t, want)
		if err := c.Create(ctx, live, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(live.Object, int64(4), "spec", "shards"); err != nil {
			t.Fatal(err)
		}
		res, err := diff.Diff(want.DeepCopy(), live, diff.WithNormalizer(ignoreStatus{}))
		if err != nil || !res.Modified {
			t.Errorf("spec.shards 3 in Git, 4 live: modified %v, err %v; want a diff", res != nil && res.Modified, err)
		}
	})
}

// clientSideApplied is o as kubectl apply creates it: with the
// last-applied annotation holding o itself.
func clientSideApplied(t *testing.T, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	applied := o.DeepCopy()
	js, err := json.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	annotations := applied.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[lastAppliedAnnotation] = string(js) + "\n"
	applied.SetAnnotations(annotations)
	return applied
}

// ignoreStatus drops status before the diff, as Argo CD v3 does for every
// kind by default (argocd-cm resource.compareoptions ignoreResourceStatusField: all).
type ignoreStatus struct{}

func (ignoreStatus) Normalize(u *unstructured.Unstructured) error {
	unstructured.RemoveNestedField(u.Object, "status")
	return nil
}

// describeDiff lists the paths where Argo CD's predicted live object (Git
// applied to live) and the live object differ.
func describeDiff(t *testing.T, res *diff.DiffResult) string {
	t.Helper()
	var predicted, live any
	if err := json.Unmarshal(res.PredictedLive, &predicted); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res.NormalizedLive, &live); err != nil {
		t.Fatal(err)
	}
	var out string
	for _, d := range jsonDiff(predicted, live, "") {
		out += "  " + d + "\n"
	}
	return out
}

// jsonDiff lists the paths where two JSON values differ, as "path: Git-side
// value, live value".
func jsonDiff(git, live any, path string) []string {
	gm, gok := git.(map[string]any)
	lm, lok := live.(map[string]any)
	if gok && lok {
		keys := map[string]bool{}
		for k := range gm {
			keys[k] = true
		}
		for k := range lm {
			keys[k] = true
		}
		var out []string
		for _, k := range slices.Sorted(mapKeys(keys)) {
			out = append(out, jsonDiff(gm[k], lm[k], path+"."+k)...)
		}
		return out
	}
	gl, gok := git.([]any)
	ll, lok := live.([]any)
	if gok && lok && len(gl) == len(ll) {
		var out []string
		for i := range gl {
			out = append(out, jsonDiff(gl[i], ll[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	if reflect.DeepEqual(git, live) {
		return nil
	}
	return []string{fmt.Sprintf("%s: Git %v, live %v", path, git, live)}
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func findKind(t *testing.T, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	t.Fatalf("no %s rendered", kind)
	return nil
}

// startAPIServer starts etcd and kube-apiserver with the Prometheus
// Operator's CRDs that the prod overlay's prometheus component needs (kept
// by the kustomize package in kustomize/testdata/crds); our own CRD comes
// from the rendered example.
func startAPIServer(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		abs, err := filepath.Abs(filepath.Join(repoRoot, "bin"))
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("KUBEBUILDER_ASSETS", abs)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "kustomize", "testdata", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (run `make tools` first): %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

func namespaceObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
}

// createIfAbsent creates o, or leaves it when an earlier environment created
// it (every environment installs the same Namespaces).
func createIfAbsent(ctx context.Context, c client.Client, o *unstructured.Unstructured) error {
	if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}
