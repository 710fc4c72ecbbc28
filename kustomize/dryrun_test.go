package kustomize

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/redis-operator/redis-operator/test/apiwarnings"
)

// fieldOwner is the field manager of the tests' applies.
const fieldOwner = "kustomize-test"

// startAPIServer starts kube-apiserver and etcd (envtest, with the binaries
// `make tools` builds into bin/) with our CRD and the third-party CRDs of
// the kinds our components create (testdata/crds: the Prometheus
// Operator's ServiceMonitor and PrometheusRule, cert-manager's Certificate
// and Issuer).
func startAPIServer(t *testing.T) (client.Client, *apiwarnings.Collector) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		abs, err := filepath.Abs(filepath.Join("..", "bin"))
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv("KUBEBUILDER_ASSETS", abs)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("base", "crd", "bases"), filepath.Join("testdata", "crds")},
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
	w := &apiwarnings.Collector{}
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// dryRunApply sends obj as a server-side apply with dryRun=All and strict
// field validation, and returns the object the API server would store.
func dryRunApply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	u := obj.DeepCopy()
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(fieldOwner), client.ForceOwnership, client.DryRunAll); err != nil {
		return nil, err
	}
	return u, nil
}

// TestServerSideDryRun applies every rendered overlay with a server-side
// dry run against a real API server, so that schema errors, unknown fields
// (strict validation), bad references between kinds the server checks and
// Pod Security violations fail the test, not the first install.
func TestServerSideDryRun(t *testing.T) {
	c, warned := startAPIServer(t)
	ctx := context.Background()

	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			objs := rendered(t, overlay)
			// Namespaced objects need their namespace to exist, also in a
			// dry run; create it for real (with the render's labels, which
			// switch on the restricted Pod Security Standard).
			ns := find(t, objs, "Namespace", namespace)
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(ns.DeepCopy()),
				client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				got, err := dryRunApply(ctx, c, o)
				if err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
					continue
				}
				if got.GetUID() == "" {
					t.Errorf("%s %s: the dry run returned no server-side object", o.GetKind(), o.GetName())
				}
			}
			if w := warned.Take(); len(w) > 0 {
				t.Errorf("API server warnings:\n%s", strings.Join(w, "\n"))
			}
			// A dry run stores nothing.
			d := find(t, objs, "Deployment", manager)
			err := c.Get(ctx, client.ObjectKeyFromObject(d), d.DeepCopy())
			if !apierrors.IsNotFound(err) {
				t.Errorf("Deployment after the dry run: %v, want NotFound", err)
			}
		})
	}

	// Each component on the base alone, as another overlay would use it
	// (the cert-manager component needs cert-manager's CRDs, which
	// testdata/crds has; argocd patches a stand-in argocd-cm).
	t.Run("components", func(t *testing.T) {
		for _, name := range components(t) {
			for _, o := range renderComponent(t, name) {
				if _, err := dryRunApply(ctx, c, o); err != nil {
					t.Errorf("%s: %s %s: %v", name, o.GetKind(), o.GetName(), err)
				}
			}
		}
		if w := warned.Take(); len(w) > 0 {
			t.Errorf("API server warnings:\n%s", strings.Join(w, "\n"))
		}
	})

	// The manager's pod template passes the restricted Pod Security
	// Standard, which the Namespace enforces: a Pod made from it is
	// admitted (dry run), and the same Pod without runAsNonRoot is not,
	// which shows the admission check is really on.
	t.Run("pod-security", func(t *testing.T) {
		for _, overlay := range Overlays() {
			pod := managerPod(t, overlay)
			if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
				t.Errorf("%s: the manager's pod is not admitted in %s: %v", overlay, namespace, err)
			}
		}
		pod := managerPod(t, "prod")
		pod.Spec.SecurityContext.RunAsNonRoot = nil
		pod.Spec.Containers[0].SecurityContext.RunAsNonRoot = nil
		err := c.Create(ctx, pod, client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "restricted") {
			t.Errorf("a pod without runAsNonRoot: %v, want a Pod Security (restricted) rejection", err)
		}
		warned.Take()
	})

	// The dry run catches schema errors: a misspelt field and a wrong type,
	// in a built-in kind and in a custom resource.
	t.Run("schema-errors", func(t *testing.T) {
		objs := rendered(t, "prod")
		cases := []struct {
			name   string
			obj    *unstructured.Unstructured
			mutate func(map[string]any)
			field  string
		}{
			{"unknown field in Deployment", find(t, objs, "Deployment", manager), func(m map[string]any) {
				unstructured.SetNestedField(m, int64(3), "spec", "replica")
			}, "replica"},
			{"wrong type in Deployment", find(t, objs, "Deployment", manager), func(m map[string]any) {
				unstructured.SetNestedField(m, "three", "spec", "replicas")
			}, "replicas"},
			{"unknown field in PrometheusRule", find(t, objs, "PrometheusRule", "redis-cluster"), func(m map[string]any) {
				unstructured.SetNestedField(m, "x", "spec", "grups")
			}, "grups"},
			{"wrong type in ServiceMonitor", find(t, objs, "ServiceMonitor", "redis-exporter"), func(m map[string]any) {
				unstructured.SetNestedField(m, "yes", "spec", "namespaceSelector", "any")
			}, "any"},
		}
		for _, tc := range cases {
			bad := tc.obj.DeepCopy()
			tc.mutate(bad.Object)
			_, err := dryRunApply(ctx, c, bad)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s: %v, want an error naming %s", tc.name, err, tc.field)
			}
		}
		warned.Take()
	})
}

// managerPod is a Pod in the operator's namespace with the pod template of
// the overlay's manager Deployment.
func managerPod(t *testing.T, overlay string) *corev1.Pod {
	t.Helper()
	d := find(t, rendered(t, overlay), "Deployment", manager)
	tmpl, _, err := unstructured.NestedMap(d.Object, "spec", "template")
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pod); err != nil {
		t.Fatal(err)
	}
	pod.ObjectMeta = metav1.ObjectMeta{Name: "manager-" + overlay, Namespace: namespace, Labels: pod.Labels}
	if pod.Spec.SecurityContext == nil || pod.Spec.Containers[0].SecurityContext == nil {
		t.Fatalf("%s: the manager's pod has no security context", overlay)
	}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](10)
	return pod
}
