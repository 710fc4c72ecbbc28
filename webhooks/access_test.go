package webhooks

import (
	"context"
	"slices"
	"strings"
	"testing"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
)

// TestVaultAddressPolicyAtAdmission: the webhook applies the operator's
// address policy to spec.auth.vault.address when it is new or changed.
func TestVaultAddressPolicyAtAdmission(t *testing.T) {
	withAddress := func(address string) *cachev1beta1.RedisCluster {
		rc := validHub()
		rc.Spec.Auth = vaultAuth()
		rc.Spec.Auth.Vault.Address = address
		return rc
	}
	listed := credentials.AddressPolicy{Allowlist: []string{"https://vault.vault.svc:8200/"}}
	for _, tc := range []struct {
		name   string
		policy credentials.AddressPolicy
		old    *cachev1beta1.RedisCluster
		obj    *cachev1beta1.RedisCluster
		want   string // the cause's prefix; "" for accepted
	}{
		{name: "https by default", obj: withAddress("https://vault.example:8200")},
		{name: "plain http by default", obj: withAddress("http://vault.example:8200"),
			want: "spec.auth.vault.address: Forbidden: http://vault.example:8200 is plain http, which would send the Vault login token and the password unencrypted; use https, or start the operator with --vault-allow-insecure-http"},
		{name: "plain http allowed by the flag", policy: credentials.AddressPolicy{AllowInsecureHTTP: true}, obj: withAddress("http://vault.example:8200")},
		{name: "listed", policy: listed, obj: withAddress("https://vault.vault.svc:8200")},
		{name: "not listed", policy: listed, obj: withAddress("https://vault.attacker.example"),
			want: "spec.auth.vault.address: Forbidden: https://vault.attacker.example is not under any prefix of the operator's --vault-address-allowlist (https://vault.vault.svc:8200/)"},
		{name: "moved out of the list", policy: listed, old: withAddress("https://vault.vault.svc:8200"), obj: withAddress("https://vault.vault.svc.attacker.example:8200"),
			want: "spec.auth.vault.address: Forbidden: https://vault.vault.svc.attacker.example:8200 is not under any prefix"},
		{name: "unchanged address stored before the policy", policy: listed, old: withAddress("https://old-vault:8200"), obj: func() *cachev1beta1.RedisCluster {
			rc := withAddress("https://old-vault:8200")
			rc.Spec.Shards = 4
			return rc
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&Validator{VaultAddresses: tc.policy}).ValidateV1beta1(context.Background(), tc.old, tc.obj)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			if got := causes(t, err); len(got) != 1 || !strings.HasPrefix(got[0], tc.want) {
				t.Fatalf("causes %q, want one starting with %q", got, tc.want)
			}
		})
	}
	// Through v1alpha1 the address lives in the conversion data.
	spoke := spokeOf(t, withAddress("http://vault.example:8200"))
	_, err := (&Validator{}).ValidateV1alpha1(context.Background(), nil, spoke)
	if got := causes(t, err); len(got) != 1 || !strings.HasPrefix(got[0], "metadata.annotations[cache.redis.io/conversion-data]: Invalid value: v1beta1 field spec.auth.vault.address: Forbidden: http://vault.example:8200 is plain http") {
		t.Fatalf("v1alpha1 causes %q", got)
	}
}

// TestAccessChecks: which permissions a create or an update asks of the
// requesting user.
func TestAccessChecks(t *testing.T) {
	withAuth := func(mutate func(*cachev1beta1.AuthSpec)) *cachev1beta1.RedisCluster {
		rc := validHub()
		rc.Namespace = "team"
		rc.Spec.Auth = vaultAuth()
		mutate(rc.Spec.Auth)
		return rc
	}
	role := func(a *cachev1beta1.AuthSpec) {}
	namedSA := func(a *cachev1beta1.AuthSpec) { a.Vault.ServiceAccountName = "vault-login" }
	token := func(a *cachev1beta1.AuthSpec) {
		a.Vault.Role = ""
		a.Vault.TokenSecretRef = &cachev1beta1.SecretKeySelector{Name: "vault-token", Key: "token"}
		a.Vault.CASecretRef = &cachev1beta1.SecretKeySelector{Name: "vault-ca", Key: "ca.crt"}
	}
	secret := func(a *cachev1beta1.AuthSpec) {
		a.Vault = nil
		a.SecretRef = &cachev1beta1.SecretKeySelector{Name: "redis-password", Key: "password"}
	}
	then := func(fs ...func(*cachev1beta1.AuthSpec)) func(*cachev1beta1.AuthSpec) {
		return func(a *cachev1beta1.AuthSpec) {
			for _, f := range fs {
				f(a)
			}
		}
	}
	for _, tc := range []struct {
		name     string
		old, obj *cachev1beta1.RedisCluster
		want     []string
	}{
		{name: "create, role, default service account", obj: withAuth(role),
			want: []string{"spec.auth.vault.serviceAccountName: create serviceaccounts/token team/cache"}},
		{name: "create, role, named service account", obj: withAuth(namedSA),
			want: []string{"spec.auth.vault.serviceAccountName: create serviceaccounts/token team/vault-login"}},
		{name: "create, token Secret and CA", obj: withAuth(token),
			want: []string{"spec.auth.vault.tokenSecretRef.name: get secrets team/vault-token", "spec.auth.vault.caSecretRef.name: get secrets team/vault-ca"}},
		{name: "create, password Secret", obj: withAuth(secret),
			want: []string{"spec.auth.secretRef.name: get secrets team/redis-password"}},
		{name: "create, no auth", obj: validHub()},
		{name: "update, auth unchanged", old: withAuth(namedSA), obj: withAuth(namedSA)},
		{name: "update, service account changed", old: withAuth(role), obj: withAuth(namedSA),
			want: []string{"spec.auth.vault.serviceAccountName: create serviceaccounts/token team/vault-login"}},
		{name: "update, address changed", old: withAuth(namedSA), obj: withAuth(then(namedSA, func(a *cachev1beta1.AuthSpec) { a.Vault.Address = "https://elsewhere:8200" })),
			want: []string{"spec.auth.vault.serviceAccountName: create serviceaccounts/token team/vault-login", "spec.auth: get secrets team/cache-auth"}},
		{name: "update, audience changed", old: withAuth(namedSA), obj: withAuth(then(namedSA, func(a *cachev1beta1.AuthSpec) { a.Vault.Audience = "https://kubernetes.default.svc" })),
			want: []string{"spec.auth.vault.serviceAccountName: create serviceaccounts/token team/vault-login"}},
		// Another role, path or mount reads another secret with the same token.
		{name: "update, role changed", old: withAuth(namedSA), obj: withAuth(then(namedSA, func(a *cachev1beta1.AuthSpec) { a.Vault.Role = "other" })),
			want: []string{"spec.auth.vault.serviceAccountName: create serviceaccounts/token team/vault-login"}},
		{name: "update, path changed", old: withAuth(namedSA), obj: withAuth(then(namedSA, func(a *cachev1beta1.AuthSpec) { a.Vault.Path = "platform/admin" })),
			want: []string{"spec.auth.vault.serviceAccountName: create serviceaccounts/token team/vault-login", "spec.auth: get secrets team/cache-auth"}},
		{name: "update, token Secret's login reads another path", old: withAuth(token), obj: withAuth(then(token, func(a *cachev1beta1.AuthSpec) { a.Vault.Path = "platform/admin" })),
			want: []string{"spec.auth.vault.tokenSecretRef.name: get secrets team/vault-token", "spec.auth: get secrets team/cache-auth"}},
		{name: "update, nothing of the login changed", old: withAuth(namedSA), obj: withAuth(namedSA)},
		{name: "update, token Secret moved to another address", old: withAuth(token), obj: withAuth(then(token, func(a *cachev1beta1.AuthSpec) { a.Vault.Address = "https://elsewhere:8200" })),
			want: []string{"spec.auth.vault.tokenSecretRef.name: get secrets team/vault-token", "spec.auth: get secrets team/cache-auth"}},
		{name: "update, token Secret key changed", old: withAuth(token), obj: withAuth(then(token, func(a *cachev1beta1.AuthSpec) { a.Vault.TokenSecretRef.Key = "admin" })),
			want: []string{"spec.auth.vault.tokenSecretRef.name: get secrets team/vault-token"}},
		{name: "update, token to role", old: withAuth(token), obj: withAuth(namedSA),
			want: []string{"spec.auth.vault.serviceAccountName: create serviceaccounts/token team/vault-login"}},
		{name: "update, auth appears", old: validHub(), obj: withAuth(secret),
			want: []string{"spec.auth.secretRef.name: get secrets team/redis-password", "spec.auth: get secrets team/cache-auth"}},
		{name: "update, Secret renamed", old: withAuth(secret), obj: withAuth(then(secret, func(a *cachev1beta1.AuthSpec) { a.SecretRef.Name = "other" })),
			want: []string{"spec.auth.secretRef.name: get secrets team/other", "spec.auth: get secrets team/cache-auth"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range accessChecks(tc.old, tc.obj) {
				resource := c.attrs.Resource
				if c.attrs.Subresource != "" {
					resource += "/" + c.attrs.Subresource
				}
				got = append(got, c.path.String()+": "+c.attrs.Verb+" "+resource+" "+c.attrs.Namespace+"/"+c.attrs.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("checks:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}
