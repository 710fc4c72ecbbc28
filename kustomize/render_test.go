package kustomize

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	built "github.com/redis-operator/redis-operator/kustomize/rendered"
)

const (
	namespace = "redis-operator-system"
	image     = "ghcr.io/redis-operator/redis-operator:v0.1.0"
	manager   = "redis-operator-controller-manager"
)

// rendered returns the objects of the embedded overlay, in output order.
func rendered(t *testing.T, overlay string) []*unstructured.Unstructured {
	t.Helper()
	m, err := RenderResMap(overlay)
	if err != nil {
		t.Fatal(err)
	}
	return objectsOf(t, m)
}

// objectsOf returns the objects of a rendered ResMap, in output order,
// through JSON, so numbers are int64 or float64 as in any object decoded
// from the API.
func objectsOf(t *testing.T, m resmap.ResMap) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	return objs
}

// find returns the only object of kind and name, failing the test when
// there is not exactly one.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects %s/%s, want 1", len(found), kind, name)
	}
	return found[0]
}

func has(objs []*unstructured.Unstructured, kind string) bool {
	return slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind })
}

// as converts an unstructured object into a typed one, failing on fields
// the type does not know (a misspelt field in a manifest).
func as[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s/%s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func TestOverlays(t *testing.T) {
	if got, want := Overlays(), []string{"dev", "prod", "staging"}; !slices.Equal(got, want) {
		t.Fatalf("Overlays() = %v, want %v", got, want)
	}
}

func TestRenderUnknownOverlay(t *testing.T) {
	_, err := Render("production")
	if err == nil {
		t.Fatal("Render(production) succeeded")
	}
	for _, want := range []string{`"production"`, "dev, prod, staging"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// TestRenderEqualsDisk is the acceptance check: the render from
// the embedded manifests, and the install the binary prints (`redis-operator
// manifests`, package rendered), equal krusty's render of the same overlay
// from the source tree, byte for byte, for every overlay and no other.
// When the rendered files differ, `make manifests` writes them again.
func TestRenderEqualsDisk(t *testing.T) {
	if got, want := built.Overlays(), Overlays(); !slices.Equal(got, want) {
		t.Fatalf("rendered overlays %v, the tree's %v: run make manifests", got, want)
	}
	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			embedded, err := Render(overlay)
			if err != nil {
				t.Fatal(err)
			}
			dir, err := filepath.Abs(filepath.Join("overlays", overlay))
			if err != nil {
				t.Fatal(err)
			}
			m, err := Build(filesys.MakeFsOnDisk(), dir)
			if err != nil {
				t.Fatal(err)
			}
			disk, err := m.AsYaml()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(embedded, disk) {
				t.Fatalf("embedded render (%d bytes) differs from the render from disk (%d bytes)", len(embedded), len(disk))
			}
			printed, err := built.Manifests(overlay)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(printed, disk) {
				t.Fatalf("kustomize/rendered/%s.yaml (%d bytes) differs from the render from disk (%d bytes): run make manifests", overlay, len(printed), len(disk))
			}
			if !bytes.Contains(embedded, []byte("kind: Deployment")) {
				t.Fatalf("render has no Deployment:\n%s", embedded)
			}
		})
	}
}

// TestEveryObject checks what must hold for every object of every overlay:
// unique identity, the install's labels, the operator's namespace on every
// namespaced object and on nothing cluster-scoped.
func TestEveryObject(t *testing.T) {
	clusterScoped := map[string]bool{
		"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
		"ValidatingWebhookConfiguration": true, "MutatingWebhookConfiguration": true,
	}
	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			objs := rendered(t, overlay)
			seen := map[string]bool{}
			for _, o := range objs {
				id := fmt.Sprintf("%s/%s/%s", o.GroupVersionKind().GroupKind(), o.GetNamespace(), o.GetName())
				if seen[id] {
					t.Errorf("duplicate object %s", id)
				}
				seen[id] = true
				l := o.GetLabels()
				if l["app.kubernetes.io/part-of"] != "redis-operator" || l["app.kubernetes.io/managed-by"] != "kustomize" {
					t.Errorf("%s: labels %v lack part-of=redis-operator and managed-by=kustomize", id, l)
				}
				switch {
				case clusterScoped[o.GetKind()] && o.GetNamespace() != "":
					t.Errorf("%s: cluster-scoped object has namespace %q", id, o.GetNamespace())
				case !clusterScoped[o.GetKind()] && o.GetNamespace() != namespace:
					t.Errorf("%s: namespace %q, want %q", id, o.GetNamespace(), namespace)
				}
			}
			for _, kind := range []string{"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
				"Role", "RoleBinding", "ServiceAccount", "Deployment", "Service"} {
				if !has(objs, kind) {
					t.Errorf("no %s", kind)
				}
			}
			find(t, objs, "Namespace", namespace)

			// The API server reaches the conversion and validating
			// webhooks through a Service of this render.
			crd := find(t, objs, "CustomResourceDefinition", "redisclusters.cache.redis.io")
			strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
			conv, _, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service")
			if strategy != "Webhook" || conv["namespace"] != namespace || conv["path"] != "/convert" {
				t.Errorf("CRD conversion: strategy %q, service %v", strategy, conv)
			}
			svcName, _ := conv["name"].(string)
			find(t, objs, "Service", svcName)
			vwc := find(t, objs, "ValidatingWebhookConfiguration", "redis-operator-validating-webhook")
			hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
			if len(hooks) != 4 {
				t.Errorf("%d validating webhooks, want one per RedisCluster version and one per backup kind", len(hooks))
			}
			for _, h := range hooks {
				svc, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
				fail, _, _ := unstructured.NestedString(h.(map[string]any), "failurePolicy")
				if svc["name"] != svcName || svc["namespace"] != namespace || fail != "Fail" {
					t.Errorf("validating webhook service %v failurePolicy %q, want %s/%s and Fail", svc, fail, namespace, svcName)
				}
			}
		})
	}
}

// TestManager checks the manager Deployment of each overlay: replicas,
// image, flags, probes, resources, security context and its
// ServiceAccount, and the objects that go with more than one replica.
func TestManager(t *testing.T) {
	cases := []struct {
		overlay      string
		replicas     int32
		debug        bool
		cpu, memory  string
		ha           bool
		prometheus   bool
		networkPolic bool
	}{
		{overlay: "dev", replicas: 1, debug: true, cpu: "500m", memory: "512Mi"},
		{overlay: "staging", replicas: 2, cpu: "500m", memory: "512Mi", ha: true, networkPolic: true},
		{overlay: "prod", replicas: 3, cpu: "1", memory: "1Gi", ha: true, prometheus: true, networkPolic: true},
	}
	for _, tc := range cases {
		t.Run(tc.overlay, func(t *testing.T) {
			objs := rendered(t, tc.overlay)
			d := as[appsv1.Deployment](t, find(t, objs, "Deployment", manager))
			if d.Spec.Replicas == nil || *d.Spec.Replicas != tc.replicas {
				t.Errorf("replicas %v, want %d", d.Spec.Replicas, tc.replicas)
			}
			sel, err := labels.ValidatedSelectorFromSet(d.Spec.Selector.MatchLabels)
			if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("selector %v does not select the template's labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
			}
			pod := d.Spec.Template.Spec
			if len(pod.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Containers))
			}
			c := pod.Containers[0]
			if c.Image != image {
				t.Errorf("image %q, want %q", c.Image, image)
			}
			for _, arg := range []string{"--leader-elect", "--health-probe-bind-address=:8081"} {
				if !slices.Contains(c.Args, arg) {
					t.Errorf("args %v lack %s", c.Args, arg)
				}
			}
			if got := slices.Contains(c.Args, "--zap-log-level=debug"); got != tc.debug {
				t.Errorf("debug logging %v, want %v (args %v)", got, tc.debug, c.Args)
			}
			for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "health" {
					t.Errorf("probe for %s: %+v", path, probe)
				}
			}
			if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "health" && p.ContainerPort == 8081 }) {
				t.Errorf("no port health=8081 in %v", c.Ports)
			}
			lim := c.Resources.Limits
			if !lim.Cpu().Equal(resource.MustParse(tc.cpu)) || !lim.Memory().Equal(resource.MustParse(tc.memory)) {
				t.Errorf("limits cpu %s memory %s, want %s %s", lim.Cpu(), lim.Memory(), tc.cpu, tc.memory)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("requests %v", c.Resources.Requests)
			}
			psc, sc := pod.SecurityContext, c.SecurityContext
			switch {
			case psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot,
				psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault,
				sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation,
				sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem,
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}):
				t.Errorf("security context not restricted: pod %+v container %+v", psc, sc)
			}
			find(t, objs, "ServiceAccount", pod.ServiceAccountName)
			for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
				for _, o := range objs {
					if o.GetKind() != kind {
						continue
					}
					if o.GetName() == "redis-operator-metrics-reader" {
						continue // Prometheus's, not the manager's
					}
					subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
					want := map[string]any{"kind": "ServiceAccount", "name": pod.ServiceAccountName, "namespace": namespace}
					if len(subjects) != 1 || fmt.Sprint(subjects[0]) != fmt.Sprint(want) {
						t.Errorf("%s %s subjects %v, want [%v]", kind, o.GetName(), subjects, want)
					}
				}
			}

			// Every Service of the install selects the manager's pods and
			// targets a port the manager's container declares.
			for _, o := range objs {
				if o.GetKind() != "Service" {
					continue
				}
				svc := as[corev1.Service](t, o)
				if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) || len(svc.Spec.Selector) == 0 {
					t.Errorf("Service %s selector %v does not select the manager", svc.Name, svc.Spec.Selector)
				}
				for _, p := range svc.Spec.Ports {
					if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
						return cp.Name == p.TargetPort.String() || fmt.Sprint(cp.ContainerPort) == p.TargetPort.String()
					}) {
						t.Errorf("Service %s port %s targets %s, which the manager does not declare", svc.Name, p.Name, p.TargetPort.String())
					}
				}
			}

			if has(objs, "PodDisruptionBudget") != tc.ha {
				t.Errorf("PodDisruptionBudget present %v, want %v", has(objs, "PodDisruptionBudget"), tc.ha)
			}
			if tc.ha {
				pdb := as[policyv1.PodDisruptionBudget](t, find(t, objs, "PodDisruptionBudget", manager))
				if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
					t.Errorf("PDB maxUnavailable %v, want 1", pdb.Spec.MaxUnavailable)
				}
				if !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
					t.Errorf("PDB selector %v does not select the manager", pdb.Spec.Selector.MatchLabels)
				}
				aa := pod.Affinity
				if aa == nil || aa.PodAntiAffinity == nil || len(aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
					t.Fatalf("no pod anti-affinity: %+v", aa)
				}
				term := aa.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm
				if term.TopologyKey != corev1.LabelHostname || !labels.SelectorFromSet(term.LabelSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
					t.Errorf("anti-affinity term %+v does not spread the manager's pods over hosts", term)
				}
			} else if pod.Affinity != nil {
				t.Errorf("affinity %+v on a single replica", pod.Affinity)
			}
			if got := has(objs, "ServiceMonitor") && has(objs, "PrometheusRule"); got != tc.prometheus {
				t.Errorf("prometheus component present %v, want %v", got, tc.prometheus)
			}
			if got := has(objs, "NetworkPolicy"); got != tc.networkPolic {
				t.Errorf("network-policy component present %v, want %v", got, tc.networkPolic)
			}
		})
	}
}

// TestRBACReferences: every binding of every overlay refers to a role the
// same render creates (a binding to a missing role grants nothing and
// fails only at run time), and the generated ClusterRole is bound to the
// manager's ServiceAccount.
func TestRBACReferences(t *testing.T) {
	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			objs := rendered(t, overlay)
			boundToManager := map[string]bool{}
			for _, o := range objs {
				if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
					continue
				}
				kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
				name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
				role := find(t, objs, kind, name)
				if kind == "Role" && role.GetNamespace() != o.GetNamespace() {
					t.Errorf("RoleBinding %s/%s refers to Role %s in namespace %s", o.GetNamespace(), o.GetName(), name, role.GetNamespace())
				}
				subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
				for _, s := range subjects {
					if s.(map[string]any)["name"] == manager {
						boundToManager[kind+"/"+name] = true
					}
				}
			}
			for _, want := range []string{"ClusterRole/redis-operator", "Role/redis-operator-leader-election"} {
				if !boundToManager[want] {
					t.Errorf("%s is not bound to the manager's ServiceAccount (bound: %v)", want, boundToManager)
				}
			}
		})
	}
}
