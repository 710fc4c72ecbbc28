package kustomize

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/webhooks/certs"
)

// access is one request the manager's ServiceAccount makes or must not be
// able to make.
type access struct {
	verb, group, resource, namespace, name string
	allowed                                bool
}

// installRBAC creates the ServiceAccounts, roles and bindings of objs.
func installRBAC(t *testing.T, ctx context.Context, c client.Client, objs []*unstructured.Unstructured) {
	t.Helper()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := c.Create(ctx, o.DeepCopy()); err != nil {
				t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}
}

// checkAccess asks the API server's RBAC authorizer (SubjectAccessReview)
// whether the manager's ServiceAccount may make each request.
func checkAccess(t *testing.T, ctx context.Context, c client.Client, want []access) {
	t.Helper()
	for _, a := range want {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + namespace + ":" + manager,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: a.verb, Group: a.group, Resource: a.resource, Namespace: a.namespace, Name: a.name,
			},
		}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != a.allowed {
			t.Errorf("%s %s %q in namespace %q: allowed=%v, want %v (%s)", a.verb, a.resource, a.name, a.namespace,
				sar.Status.Allowed, a.allowed, sar.Status.Reason)
		}
	}
}

// TestRBACAuthorizes: on a real API server, the prod overlay's RBAC lets
// the manager update its own webhook configuration, CRD and certificate
// Secret and no other object of those kinds, and list and watch what the
// certificate rotator's informers list; the namespaced component's RBAC
// grants the controller's rights in the install's namespace only.
func TestRBACAuthorizes(t *testing.T) {
	ctx := context.Background()
	named := []access{
		{"update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", certs.DefaultValidatingWebhookConfigurationName, true},
		{"update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "someone-elses-webhook", false},
		{"list", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", true},
		{"watch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", true},
		{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", certs.DefaultCRDName, true},
		{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", "widgets.example.com", false},
		{"list", "apiextensions.k8s.io", "customresourcedefinitions", "", "", true},
		{"create", "authorization.k8s.io", "subjectaccessreviews", "", "", true},
		{"create", "", "secrets", namespace, "", true},
		{"update", "", "secrets", namespace, certs.DefaultSecretName, true},
	}
	t.Run("prod", func(t *testing.T) {
		c, _ := startAPIServer(t)
		installRBAC(t, ctx, c, rendered(t, "prod"))
		checkAccess(t, ctx, c, append(named,
			access{"get", "", "secrets", "default", "any", true},
			access{"create", "apps", "statefulsets", "default", "", true},
		))
	})
	t.Run("namespaced", func(t *testing.T) {
		c, _ := startAPIServer(t)
		installRBAC(t, ctx, c, renderComponent(t, "namespaced"))
		checkAccess(t, ctx, c, append(named,
			access{"list", "", "secrets", namespace, "", true},
			access{"create", "apps", "statefulsets", namespace, "", true},
			access{"delete", "", "serviceaccounts", namespace, "x", false},
			access{"update", "cache.redis.io", "redisclusters", namespace, "x", true},
			access{"create", "", "serviceaccounts/token", namespace, "x", true},
			access{"create", "", "serviceaccounts/token", "default", "x", false},
			access{"list", "", "secrets", "default", "", false},
			access{"list", "", "secrets", "", "", false},
			access{"get", "", "secrets", "default", "any", false},
			access{"create", "apps", "statefulsets", "default", "", false},
			access{"list", "cache.redis.io", "redisclusters", "", "", false},
		))
	})
}
