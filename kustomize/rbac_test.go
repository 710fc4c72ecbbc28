package kustomize

import (
	"fmt"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/redis-operator/redis-operator/webhooks/certs"
)

// writeVerbs are the verbs that change an object.
var writeVerbs = []string{"update", "patch", "delete", "*"}

// namedWrites checks that every rule of rules granting a write verb on
// resource of group names exactly the objects in want, and that some rule
// grants update on them; it returns the problems found.
func namedWrites(rules []rbacv1.PolicyRule, group, resource string, want []string) []string {
	var problems []string
	granted := false
	for _, r := range rules {
		if !slices.Contains(r.APIGroups, group) || !slices.Contains(r.Resources, resource) {
			continue
		}
		writes := slices.ContainsFunc(r.Verbs, func(v string) bool { return slices.Contains(writeVerbs, v) })
		if !writes {
			continue
		}
		if !slices.Equal(r.ResourceNames, want) {
			problems = append(problems, fmt.Sprintf("a rule writes %s with resourceNames %q, want %q", resource, r.ResourceNames, want))
			continue
		}
		if slices.Contains(r.Verbs, "update") {
			granted = true
		}
	}
	if !granted {
		problems = append(problems, fmt.Sprintf("no rule grants update on %s %q", resource, want))
	}
	return problems
}

// TestRBACResourceNames: in every overlay the operator may update the
// ValidatingWebhookConfiguration and the CRD that the self-managed
// certificates patch, and the webhook certificate Secret, and no other
// object of those kinds: the rules that write them name the objects the
// same render creates (and the names package certs uses by default).
func TestRBACResourceNames(t *testing.T) {
	for _, overlay := range Overlays() {
		t.Run(overlay, func(t *testing.T) {
			objs := rendered(t, overlay)
			var webhookConfigs, crds []string
			for _, o := range objs {
				switch o.GetKind() {
				case "ValidatingWebhookConfiguration":
					webhookConfigs = append(webhookConfigs, o.GetName())
				case "CustomResourceDefinition":
					// Only CRDs with a conversion webhook get the CA injected.
					if strategy, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy"); strategy == "Webhook" {
						crds = append(crds, o.GetName())
					}
				}
			}
			if want := []string{certs.DefaultValidatingWebhookConfigurationName}; !slices.Equal(webhookConfigs, want) {
				t.Errorf("ValidatingWebhookConfigurations %v, want %v", webhookConfigs, want)
			}
			if want := []string{certs.DefaultCRDName}; !slices.Equal(crds, want) {
				t.Errorf("CRDs %v, want %v", crds, want)
			}
			cr := as[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "redis-operator"))
			for _, p := range namedWrites(cr.Rules, "admissionregistration.k8s.io", "validatingwebhookconfigurations", webhookConfigs) {
				t.Error("ClusterRole:", p)
			}
			for _, p := range namedWrites(cr.Rules, "apiextensions.k8s.io", "customresourcedefinitions", crds) {
				t.Error("ClusterRole:", p)
			}
			role := as[rbacv1.Role](t, find(t, objs, "Role", "redis-operator"))
			if role.Namespace != certs.DefaultNamespace {
				t.Errorf("Role redis-operator in namespace %q, want %q", role.Namespace, certs.DefaultNamespace)
			}
			for _, p := range namedWrites(role.Rules, "", "secrets", []string{certs.DefaultSecretName}) {
				t.Error("Role:", p)
			}
		})
	}
}
