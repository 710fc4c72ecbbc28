package webhooks

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestTenantThroughAPIServer is the attacker's afternoon: "tenant" may
// edit this API's three kinds and nothing else, and tries each way a spec
// could make the operator read or use something of the namespace on its
// behalf. Every attempt is refused with a cause naming the field, what the
// operator would have done and the Role that would allow it; "trusted",
// who holds those rights, writes the same objects. The config keys that
// turn Redis into a code-loading server are refused for both.
func TestTenantThroughAPIServer(t *testing.T) {
	admin := startAPIServer(t)
	ctx := context.Background()
	ns, tenant, trusted := tenantNamespace(t, admin, "tenant", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"db-password", "demo-auth", "cache-auth"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{"ci-deployer", "default"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create"}},
	})

	store := func() cachev1beta1.ObjectStoreSpec {
		return cachev1beta1.ObjectStoreSpec{Endpoint: "https://s3.example.com", Bucket: "backups", Region: "us-east-1",
			CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: "db-password", AccessKeyIDKey: "username", SecretAccessKeyKey: "password"}}
	}
	deployer := func() *cachev1beta1.VaultSource {
		return &cachev1beta1.VaultSource{Address: "https://vault.vault.svc:8200", Path: "redis/prod", Role: "redis", ServiceAccountName: "ci-deployer"}
	}
	cluster := func(name string, mutate func(*cachev1beta1.RedisCluster)) *cachev1beta1.RedisCluster {
		rc := validHub()
		rc.Namespace, rc.Name = ns, name
		mutate(rc)
		return rc
	}
	backupOf := func(name string, s cachev1beta1.ObjectStoreSpec) *cachev1beta1.RedisClusterBackup {
		return &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: cachev1beta1.RedisClusterBackupSpec{ClusterName: "demo", ObjectStore: s}}
	}
	forbidden := func(path, what string) string {
		return path + `: Forbidden: user "tenant" may not ` + what + ` in namespace "` + ns + `"`
	}
	secretLeak := func(p string) []string {
		return []string{
			forbidden(p+".clusterName", `get Secret "demo-auth"`),
			forbidden(p+".objectStore.credentialsSecretRef.name", `get Secret "db-password"`) +
				`, and the operator would sign requests to https://s3.example.com (bucket "backups", prefix "") with the access keys it holds (keys "username" and "password")`,
		}
	}
	token := func(p string) string {
		return forbidden(p+".serviceAccountName", `create serviceaccounts/token for ServiceAccount "ci-deployer"`)
	}

	for _, tc := range []struct {
		name string
		obj  func() client.Object
		want []string // the tenant's causes, by prefix
	}{
		{"backup-secret", func() client.Object { return backupOf("leak", store()) }, secretLeak("spec")},
		{"schedule-secret", func() client.Object {
			return &cachev1beta1.RedisClusterScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leak-daily"},
				Spec: cachev1beta1.RedisClusterScheduledBackupSpec{Schedule: "0 3 * * *", Template: backupOf("", store()).Spec}}
		}, secretLeak("spec.template")},
		{"backup-vault-token", func() client.Object {
			s := store()
			s.CredentialsSecretRef = nil
			s.CredentialsVault = &cachev1beta1.ObjectStoreVaultCredentials{Vault: *deployer()}
			return backupOf("token", s)
		}, []string{forbidden("spec.clusterName", `get Secret "demo-auth"`), token("spec.objectStore.credentialsVault.vault")}},
		{"user-vault-token", func() client.Object {
			return cluster("users", func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Users = []cachev1beta1.UserSpec{{Name: "app", Rules: "~app:* +@read", PasswordFrom: cachev1beta1.UserPasswordSource{Vault: deployer()}}}
			})
		}, []string{token("spec.users[0].passwordFrom.vault")}},
		{"restore-secret", func() client.Object {
			return cluster("restore", func(rc *cachev1beta1.RedisCluster) {
				s := store()
				rc.Spec.Bootstrap = &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{ObjectStore: &s, Path: ns + "/demo/nightly"}}
			})
		}, []string{forbidden("spec.bootstrap.fromBackup.objectStore.credentialsSecretRef.name", `get Secret "db-password"`)}},
		{"pod-extras", func() client.Object {
			return cluster("extras", func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Pod.Volumes = []corev1.Volume{
					{Name: "stolen", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-password"}}},
					{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
						{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "token"}}}}}},
				}
				rc.Spec.Pod.Sidecars = []corev1.Container{{Name: "exfil", Image: "busybox",
					EnvFrom:      []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ci-secrets"}}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "auth", MountPath: "/auth"}}}}
			})
		}, []string{
			forbidden("spec.pod", "create pods"),
			forbidden("spec.pod.volumes[0].secret.secretName", `get Secret "db-password"`) + ", and the operator would mount it into the Redis pods",
			forbidden("spec.pod.volumes[1].projected.sources[0].serviceAccountToken", `create serviceaccounts/token for ServiceAccount "default"`) +
				`, and the Redis pods would receive a token of it for audience "vault"`,
			forbidden("spec.pod.sidecars[0].envFrom[0].secretRef.name", `get Secret "ci-secrets"`) + ", and the operator would expose it to the container",
			forbidden("spec.pod.sidecars[0].volumeMounts[0].name", `get Secret "extras-auth"`),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkTenantCauses(t, apiCauses(t, tenant.Create(ctx, tc.obj())), tc.want)
			if tc.name == "pod-extras" {
				// The cluster's own auth Secret is not in trusted's Role either.
				return
			}
			if err := trusted.Create(ctx, tc.obj()); err != nil {
				t.Fatalf("trusted: %v", err)
			}
		})
	}

	// The token audience is the operator's to choose (--vault-audiences):
	// not even trusted may ask for the API server's.
	apiAudience := deployer()
	apiAudience.Audience = "https://kubernetes.default.svc"
	s := store()
	s.CredentialsSecretRef = nil
	s.CredentialsVault = &cachev1beta1.ObjectStoreVaultCredentials{Vault: *apiAudience}
	causes := apiCauses(t, trusted.Create(ctx, backupOf("api-audience", s)))
	if len(causes) != 1 || !strings.HasPrefix(causes[0], `spec.objectStore.credentialsVault.vault.audience: Forbidden: "https://kubernetes.default.svc" is not among the operator's --vault-audiences (vault)`) {
		t.Errorf("trusted asking for the API server's audience: causes %q", causes)
	}

	// Config keys that load code or open debugging commands: refused for
	// everyone, with the reason.
	for key, want := range map[string]string{
		"loadmodule":               `spec.config[loadmodule]: Forbidden: `,
		"enable-debug-command":     `spec.config[enable-debug-command]: Forbidden: `,
		"enable-module-command":    `spec.config[enable-module-command]: Forbidden: `,
		"enable-protected-configs": `spec.config[enable-protected-configs]: Forbidden: `,
	} {
		value := "yes"
		if key == "loadmodule" {
			value = "/tmp/evil.so"
		}
		rc := cluster("conf-"+strings.ReplaceAll(key, "-", ""), func(rc *cachev1beta1.RedisCluster) { rc.Spec.Config[key] = value })
		if causes := apiCauses(t, trusted.Create(ctx, rc)); len(causes) != 1 || !strings.HasPrefix(causes[0], want) {
			t.Errorf("config %s %s: causes %q, want one starting with %q", key, value, causes, want)
		}
	}

	// The schema keeps backup paths inside <prefix>/<namespace>/<cluster>.
	for name, mutate := range map[string]func(*cachev1beta1.RedisClusterBackup){
		"cluster":   func(b *cachev1beta1.RedisClusterBackup) { b.Spec.ClusterName = "../other-namespace" },
		"prefix":    func(b *cachev1beta1.RedisClusterBackup) { b.Spec.ObjectStore.Prefix = "redis/../../other-namespace" },
		"dotprefix": func(b *cachev1beta1.RedisClusterBackup) { b.Spec.ObjectStore.Prefix = "." },
	} {
		b := backupOf("path-"+name, store())
		mutate(b)
		err := trusted.Create(ctx, b)
		if err == nil || !strings.Contains(err.Error(), "should match") {
			t.Errorf("backup with a %s leaving its path: %v, want the schema's pattern refusal", name, err)
		}
	}
}

// tenantNamespace makes a namespace where "tenant" and "trusted" may edit
// this API's three kinds, and trusted also holds rights (what the specs
// make the operator use); it returns the namespace and a client of each.
func tenantNamespace(t *testing.T, admin client.Client, name string, rights []rbacv1.PolicyRule) (string, client.Client, client.Client) {
	t.Helper()
	ns := newNamespace(t, admin, name)
	editor := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-editor"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{cachev1beta1.GroupVersion.Group},
			Resources: []string{"redisclusters", "redisclusterbackups", "redisclusterscheduledbackups"},
			Verbs:     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	uses := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "what-the-specs-use"}, Rules: rights}
	for _, obj := range []client.Object{
		editor, uses,
		binding(ns, "tenant-edits", editor.Name, "tenant"),
		binding(ns, "trusted-edits", editor.Name, "trusted"),
		binding(ns, "trusted-rights", uses.Name, "trusted"),
	} {
		if err := admin.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	return ns, as(t, "tenant"), as(t, "trusted")
}

// checkTenantCauses: the tenant's refusal has exactly the causes want (by
// prefix), and one of them names the Role that would allow it.
func checkTenantCauses(t *testing.T, causes, want []string) {
	t.Helper()
	if len(causes) != len(want) {
		t.Fatalf("tenant: causes %q, want %d", causes, len(want))
	}
	for _, w := range want {
		if !hasCause(causes, w) {
			t.Errorf("tenant: causes %q, want one starting with %q", causes, w)
		}
	}
	if !strings.Contains(strings.Join(causes, "\n"), "ask for a Role granting") {
		t.Errorf("tenant: no cause says which Role would allow it: %q", causes)
	}
}
