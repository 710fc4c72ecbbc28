package kustomize

import (
	"maps"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// clusterScoped are the resources of the operator's rules that are not
// namespaced (the rest are).
var clusterScoped = []string{"validatingwebhookconfigurations", "customresourcedefinitions", "subjectaccessreviews", "tokenreviews", "nodes", "storageclasses"}

// grants flattens rules into one "group resource verb name" entry per
// permission (name empty for any object), to compare rule sets however
// they are grouped.
func grants(rules []rbacv1.PolicyRule) map[string]bool {
	out := map[string]bool{}
	for _, r := range rules {
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out[g+" "+res+" "+v+" "+n] = true
					}
				}
			}
		}
	}
	return out
}

// TestNamespacedComponent: the namespaced component splits the generated
// ClusterRole without losing or adding a permission: redis-operator keeps
// exactly its cluster-scoped rules, redis-operator-namespaced holds exactly
// the namespaced ones and is bound only by a RoleBinding in the install's
// namespace, which is what the manager's --watch-namespaces names.
func TestNamespacedComponent(t *testing.T) {
	base, err := Build(mustMemFS(t), "/base")
	if err != nil {
		t.Fatal(err)
	}
	var generated *rbacv1.ClusterRole
	for _, r := range base.Resources() {
		if r.GetKind() != "ClusterRole" || r.GetName() != "redis-operator" {
			continue
		}
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		generated = as[rbacv1.ClusterRole](t, u)
	}
	if generated == nil {
		t.Fatal("the base renders no ClusterRole redis-operator")
	}

	objs := renderComponent(t, "namespaced")
	cluster := as[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "redis-operator"))
	namespaced := as[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "redis-operator-namespaced"))
	for _, r := range cluster.Rules {
		for _, res := range r.Resources {
			if !slices.Contains(clusterScoped, res) {
				t.Errorf("ClusterRole redis-operator grants namespaced %s cluster-wide", res)
			}
		}
	}
	for _, r := range namespaced.Rules {
		for _, res := range r.Resources {
			if slices.Contains(clusterScoped, res) {
				t.Errorf("ClusterRole redis-operator-namespaced grants cluster-scoped %s, which a RoleBinding cannot grant", res)
			}
		}
	}
	want, got := grants(generated.Rules), grants(cluster.Rules)
	for g := range grants(namespaced.Rules) {
		if got[g] {
			t.Errorf("granted by both roles: %s", g)
		}
		got[g] = true
	}
	if !maps.Equal(got, want) {
		for g := range want {
			if !got[g] {
				t.Errorf("lost in the split: %s", g)
			}
		}
		for g := range got {
			if !want[g] {
				t.Errorf("not in the generated ClusterRole: %s", g)
			}
		}
	}

	bound := false
	for _, o := range objs {
		name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		if name != "redis-operator-namespaced" {
			continue
		}
		switch o.GetKind() {
		case "ClusterRoleBinding":
			t.Errorf("ClusterRoleBinding %s grants redis-operator-namespaced cluster-wide", o.GetName())
		case "RoleBinding":
			rb := as[rbacv1.RoleBinding](t, o)
			if rb.Namespace != namespace {
				t.Errorf("RoleBinding %s in namespace %q, want %q", rb.Name, rb.Namespace, namespace)
			}
			for _, s := range rb.Subjects {
				if s.Kind == "ServiceAccount" && s.Name == manager && s.Namespace == namespace {
					bound = true
				}
			}
		}
	}
	if !bound {
		t.Error("no RoleBinding binds redis-operator-namespaced to the manager's ServiceAccount")
	}

	dep := as[appsv1.Deployment](t, find(t, objs, "Deployment", manager))
	c := dep.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, "--watch-namespaces=$(POD_NAMESPACE)") {
		t.Errorf("manager args %v lack --watch-namespaces=$(POD_NAMESPACE)", c.Args)
	}
	podNamespace := false
	for _, e := range c.Env {
		if e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
			podNamespace = true
		}
	}
	if !podNamespace {
		t.Error("POD_NAMESPACE, which the flag expands, is not the pod's namespace")
	}
}
