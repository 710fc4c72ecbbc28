package webhooks

import (
	"context"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestAccessThroughAPIServer: the API server (RBAC authorization, as
// envtest starts it) calls the webhook, which asks it with
// SubjectAccessReviews whether the requesting user may read the Secrets
// and mint the service-account token the spec makes the operator use.
// "tenant" is bound only to a RedisCluster editor Role and is refused on
// each field; "trusted" also holds a Role for those Secrets and that
// service account's token, and passes.
func TestAccessThroughAPIServer(t *testing.T) {
	admin := startAPIServer(t)
	ctx := context.Background()
	ns := newNamespace(t, admin, "access")

	editor := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rediscluster-editor"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{cachev1beta1.GroupVersion.Group}, Resources: []string{"redisclusters"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	vaultUser := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "redis-credentials"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"redis-password", "vault-token", "vault-ca"}},
			{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{"vault-login", "defaulted"}},
		},
	}
	for _, obj := range []client.Object{
		editor, vaultUser,
		binding(ns, "tenant-edits", editor.Name, "tenant"),
		binding(ns, "trusted-edits", editor.Name, "trusted"),
		binding(ns, "trusted-credentials", vaultUser.Name, "trusted"),
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	tenant, trusted := as(t, "tenant"), as(t, "trusted")

	withAuth := func(name string, auth *cachev1beta1.AuthSpec) *cachev1beta1.RedisCluster {
		rc := fullHub(ns, name)
		rc.Spec.Auth = auth
		return rc
	}
	vault := func() *cachev1beta1.VaultSource {
		return &cachev1beta1.VaultSource{Address: "https://vault.vault.svc:8200", Path: "redis/prod", Role: "redis"}
	}
	named := vault()
	named.ServiceAccountName = "vault-login"
	tokenAndCA := vault()
	tokenAndCA.Role = ""
	tokenAndCA.TokenSecretRef = &cachev1beta1.SecretKeySelector{Name: "vault-token"}
	tokenAndCA.CASecretRef = &cachev1beta1.SecretKeySelector{Name: "vault-ca"}

	for _, tc := range []struct {
		name string
		auth *cachev1beta1.AuthSpec
		want []string // the tenant's causes, by prefix
	}{
		{"secret", &cachev1beta1.AuthSpec{SecretRef: &cachev1beta1.SecretKeySelector{Name: "redis-password"}},
			[]string{`spec.auth.secretRef.name: Forbidden: user "tenant" may not get Secret "redis-password" in namespace "` + ns + `", and the operator would copy its password`}},
		{"sa", &cachev1beta1.AuthSpec{Vault: named},
			[]string{`spec.auth.vault.serviceAccountName: Forbidden: user "tenant" may not create serviceaccounts/token for ServiceAccount "vault-login" in namespace "` + ns + `", and the operator would request a token of it (audience "vault") and send it to https://vault.vault.svc:8200, logging in as role "redis" to read secret/redis/prod: ask for a Role granting create on serviceaccounts/token with resourceNames [vault-login]`}},
		{"defaulted", &cachev1beta1.AuthSpec{Vault: vault()},
			[]string{`spec.auth.vault.serviceAccountName: Forbidden: user "tenant" may not create serviceaccounts/token for ServiceAccount "defaulted" in namespace "` + ns + `", and serviceAccountName is empty, so "defaulted" is used`}},
		{"token", &cachev1beta1.AuthSpec{Vault: tokenAndCA},
			[]string{
				`spec.auth.vault.tokenSecretRef.name: Forbidden: user "tenant" may not get Secret "vault-token" in namespace "` + ns + `", and the operator would log in to https://vault.vault.svc:8200 with the Vault token it holds and read secret/redis/prod: ask for a Role granting get on secrets with resourceNames [vault-token]`,
				`spec.auth.vault.caSecretRef.name: Forbidden: user "tenant" may not get Secret "vault-ca"`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := withAuth(tc.name, tc.auth)
			causes := apiCauses(t, tenant.Create(ctx, rc.DeepCopy()))
			if len(causes) != len(tc.want) {
				t.Fatalf("tenant: causes %q, want %d", causes, len(tc.want))
			}
			for _, w := range tc.want {
				if !hasCause(causes, w) {
					t.Fatalf("tenant: causes %q, want one starting with %q", causes, w)
				}
			}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(rc), &cachev1beta1.RedisCluster{}); !apierrors.IsNotFound(err) {
				t.Fatalf("the refused RedisCluster exists: %v", err)
			}
			if err := trusted.Create(ctx, rc.DeepCopy()); err != nil {
				t.Fatalf("trusted: %v", err)
			}
		})
	}

	// The tenant may edit a RedisCluster the trusted user set up, but not
	// point its token elsewhere or at another account.
	stored := &cachev1beta1.RedisCluster{}
	if err := tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sa"}, stored); err != nil {
		t.Fatal(err)
	}
	scaled := stored.DeepCopy()
	scaled.Spec.Shards = 4
	if err := tenant.Update(ctx, scaled); err != nil {
		t.Fatalf("tenant scaling a RedisCluster it did not set up: %v", err)
	}
	for name, mutate := range map[string]func(*cachev1beta1.VaultSource){
		"address":  func(v *cachev1beta1.VaultSource) { v.Address = "https://vault.attacker.example" },
		"audience": func(v *cachev1beta1.VaultSource) { v.Audience = "https://kubernetes.default.svc" },
		"account":  func(v *cachev1beta1.VaultSource) { v.ServiceAccountName = "admin" },
	} {
		if err := tenant.Get(ctx, client.ObjectKeyFromObject(stored), stored); err != nil {
			t.Fatal(err)
		}
		changed := stored.DeepCopy()
		mutate(changed.Spec.Auth.Vault)
		causes := apiCauses(t, tenant.Update(ctx, changed))
		want := []string{`spec.auth.vault.serviceAccountName: Forbidden: user "tenant" may not create serviceaccounts/token`}
		if name == "audience" {
			// Also outside the operator's --vault-audiences.
			want = append(want, `spec.auth.vault.audience: Forbidden: "https://kubernetes.default.svc" is not among the operator's --vault-audiences (vault)`)
		}
		if name == "address" {
			// Another Vault: the password would be read somewhere new.
			want = append(want, `spec.auth: Forbidden: user "tenant" may not get Secret "sa-auth"`)
		}
		if len(causes) != len(want) {
			t.Errorf("tenant changing the %s: causes %q, want %d", name, causes, len(want))
		}
		for _, w := range want {
			if !hasCause(causes, w) {
				t.Errorf("tenant changing the %s: causes %q, want one starting with %q", name, causes, w)
			}
		}
	}

	// Through v1alpha1, the auth comes from the conversion data.
	alpha := &cachev1alpha1.RedisCluster{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "token"}, alpha); err != nil {
		t.Fatal(err)
	}
	alpha.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "token-alpha", Annotations: alpha.Annotations}
	causes := apiCauses(t, tenant.Create(ctx, alpha.DeepCopy()))
	if !hasCause(causes, "metadata.annotations[cache.redis.io/conversion-data]: Invalid value: v1beta1 field spec.auth.vault.tokenSecretRef.name: Forbidden: user \"tenant\" may not get Secret \"vault-token\"") {
		t.Fatalf("tenant through v1alpha1: causes %q", causes)
	}
	if err := trusted.Create(ctx, alpha.DeepCopy()); err != nil {
		t.Fatalf("trusted through v1alpha1: %v", err)
	}

	// The default address policy holds at the API server too: no plain http.
	plain := vault()
	plain.Address = "http://vault.vault.svc:8200"
	plain.ServiceAccountName = "vault-login"
	causes = apiCauses(t, trusted.Create(ctx, withAuth("plain", &cachev1beta1.AuthSpec{Vault: plain})))
	if len(causes) != 1 || !strings.HasPrefix(causes[0], "spec.auth.vault.address: Forbidden: http://vault.vault.svc:8200 is plain http") {
		t.Fatalf("plain http: causes %q", causes)
	}
}

func binding(ns, name, role, user string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
}

// as is a client of the test API server impersonating user.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(apiserver.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: apiserver.scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
