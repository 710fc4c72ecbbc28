//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestSecurity (group security): the attacker's afternoon on the installed
// operator. A ServiceAccount whose Role allows only this API's three kinds
// (403 on Secrets, pods and tokens) tries each way a spec could make the
// operator read or use something of the namespace on its behalf: a backup
// or a schedule signing with any Secret's values, a backup's Vault login
// minting another account's token (also for the API server's audience), a
// user's password from Vault as another account, a restore reading a
// Secret, pod extras mounting a Secret, a projected token and the
// operator's own auth volume, and the config keys that load code; and,
// leaning on a cluster and a backup the admin set up, a new image in the
// cluster's pods, its auth turned off, the backup restored by name. Each is
// refused by the webhooks with a message naming the field and the Role
// that would allow it, nothing is stored, and the API server's audit log
// shows that the operator's ServiceAccount read no Secret and minted no
// token in that namespace.
func TestSecurity(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	scenario(t, "security/namespaced-editor-refused")
	ctx := context.Background()
	const ns = "e2e-security"
	if err := ensureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	editor := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache-editor"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{cachev1beta1.GroupVersion.Group},
			Resources: []string{"redisclusters", "redisclusterbackups", "redisclusterscheduledbackups"},
			Verbs:     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	for _, o := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ci-deployer"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-password"}, StringData: map[string]string{"username": "app", "password": "hunter2"}},
		editor,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-edits"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: editor.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}},
	} {
		if err := env.k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tenant := tenantClient(t, ns, "tenant")
	if err := tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-password"}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant reading the Secret itself: %v, want 403", err)
	}

	store := func() cachev1beta1.ObjectStoreSpec {
		return cachev1beta1.ObjectStoreSpec{Endpoint: "https://s3.example.com", Bucket: "backups", Region: "us-east-1",
			CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: "db-password", AccessKeyIDKey: "username", SecretAccessKeyKey: "password"}}
	}
	deployer := func(audience string) *cachev1beta1.VaultSource {
		return &cachev1beta1.VaultSource{Address: "https://vault.example.com", Path: "redis/prod", Role: "redis",
			ServiceAccountName: "ci-deployer", Audience: audience}
	}
	cluster := func(name string, mutate func(*cachev1beta1.RedisCluster)) client.Object {
		rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: cachev1beta1.RedisClusterSpec{Shards: 3}}
		mutate(rc)
		return rc
	}
	backupOf := func(name string, s cachev1beta1.ObjectStoreSpec) *cachev1beta1.RedisClusterBackup {
		return &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: cachev1beta1.RedisClusterBackupSpec{ClusterName: "cache", ObjectStore: s}}
	}
	vaultStore := func(audience string) cachev1beta1.ObjectStoreSpec {
		s := store()
		s.CredentialsSecretRef = nil
		s.CredentialsVault = &cachev1beta1.ObjectStoreVaultCredentials{Vault: *deployer(audience)}
		return s
	}
	denied := func(path, what string) string {
		return path + `: Forbidden: user "system:serviceaccount:` + ns + `:tenant" may not ` + what
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want []string // causes, by prefix; each attempt has at least these
	}{
		{"backup signing with any Secret", backupOf("leak", store()), []string{
			denied("spec.objectStore.credentialsSecretRef.name", `get Secret "db-password"`),
			denied("spec.clusterName", `get Secret "cache-auth"`)}},
		{"schedule signing with any Secret", &cachev1beta1.RedisClusterScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "leak"},
			Spec: cachev1beta1.RedisClusterScheduledBackupSpec{Schedule: "0 3 * * *", Template: backupOf("", store()).Spec}}, []string{
			denied("spec.template.objectStore.credentialsSecretRef.name", `get Secret "db-password"`)}},
		{"backup minting another account's token", backupOf("token", vaultStore("")), []string{
			denied("spec.objectStore.credentialsVault.vault.serviceAccountName", `create serviceaccounts/token for ServiceAccount "ci-deployer"`)}},
		{"a token for the API server's audience", backupOf("audience", vaultStore("https://kubernetes.default.svc")), []string{
			`spec.objectStore.credentialsVault.vault.audience: Forbidden: "https://kubernetes.default.svc" is not among the operator's --vault-audiences`}},
		{"a user's password as another account", cluster("users", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Users = []cachev1beta1.UserSpec{{Name: "app", Rules: "~app:* +@read", PasswordFrom: cachev1beta1.UserPasswordSource{Vault: deployer("")}}}
		}), []string{denied("spec.users[0].passwordFrom.vault.serviceAccountName", `create serviceaccounts/token for ServiceAccount "ci-deployer"`)}},
		{"a restore reading any Secret", cluster("restore", func(rc *cachev1beta1.RedisCluster) {
			s := store()
			rc.Spec.Bootstrap = &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{ObjectStore: &s, Path: ns + "/cache/nightly"}}
		}), []string{denied("spec.bootstrap.fromBackup.objectStore.credentialsSecretRef.name", `get Secret "db-password"`)}},
		{"pod extras", cluster("extras", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Pod.Volumes = []corev1.Volume{
				{Name: "stolen", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db-password"}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", Path: "token"}}}}}},
			}
			rc.Spec.Pod.Sidecars = []corev1.Container{{Name: "exfil", Image: "busybox",
				VolumeMounts: []corev1.VolumeMount{{Name: "auth", MountPath: "/auth"}}}}
		}), []string{
			denied("spec.pod", "create pods"),
			denied("spec.pod.volumes[0].secret.secretName", `get Secret "db-password"`),
			denied("spec.pod.volumes[1].projected.sources[0].serviceAccountToken", `create serviceaccounts/token for ServiceAccount "default"`),
			denied("spec.pod.sidecars[0].volumeMounts[0].name", `get Secret "extras-auth"`)}},
		{"loadmodule", cluster("module", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Config = map[string]string{"loadmodule": "/tmp/x.so"} }),
			[]string{`spec.config[loadmodule]: Forbidden`}},
		{"enable-debug-command", cluster("debug", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Config = map[string]string{"enable-debug-command": "yes"}
		}), []string{`spec.config[enable-debug-command]: Forbidden`}},
	} {
		checkRefused(t, tc.name, tenant.Create(ctx, tc.obj), tc.want)
	}

	// Leaning on what someone allowed set up (the plane's admin here): a
	// cluster and a backup of it. The tenant may not read the cluster
	// through a new image or by turning its auth off, nor restore the
	// backup by name.
	// In a namespace of their own, where the tenant has the same Role: the
	// operator reads what these objects name there, which the audit check
	// below (of ns) would otherwise count. The store's endpoint is on the
	// operator's own loopback.
	const ownedNS = ns + "-owned"
	if err := ensureNamespace(ctx, ownedNS); err != nil {
		t.Fatal(err)
	}
	ownedEditor := editor.DeepCopy()
	ownedEditor.Namespace, ownedEditor.ResourceVersion = ownedNS, ""
	owned := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ownedNS, Name: "owned"},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, Paused: true}}
	nightly := backupOf("nightly", store())
	nightly.Namespace, nightly.Spec.ClusterName = ownedNS, owned.Name
	nightly.Spec.ObjectStore.Endpoint = "https://127.0.0.1:1"
	for _, o := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ownedNS, Name: "db-password"}, StringData: map[string]string{"username": "app", "password": "hunter2"}},
		ownedEditor,
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ownedNS, Name: "tenant-edits"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: editor.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}},
		owned, nightly,
	} {
		if err := env.k8s.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = env.k8s.Delete(context.Background(), owned)
		_ = env.k8s.Delete(context.Background(), nightly)
	})
	deniedIn := func(path, what string) string {
		return denied(path, what) + ` in namespace "` + ownedNS + `"`
	}
	// The operator writes the new cluster's status meanwhile, which moves
	// its resourceVersion: a conflict is read again, only the webhook's
	// refusal counts.
	editOwned := func(mutate func(*cachev1beta1.RedisCluster)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			rc := &cachev1beta1.RedisCluster{}
			if err := tenant.Get(ctx, client.ObjectKeyFromObject(owned), rc); err != nil {
				return err
			}
			mutate(rc)
			return tenant.Update(ctx, rc)
		})
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want []string
	}{
		{"another's cluster running a new image", func() error {
			return editOwned(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Image = "attacker.example.com/evil:7.0.15" })
		}, []string{deniedIn("spec.image", `get Secret "owned-auth"`)}},
		{"another's cluster with auth turned off", func() error {
			return editOwned(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Auth = &cachev1beta1.AuthSpec{Disabled: true} })
		}, []string{deniedIn("spec.auth.disabled", `get Secret "owned-auth"`)}},
		{"another's backup restored by name", func() error {
			thief := cluster("thief", func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Bootstrap = &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{BackupName: "nightly"}}
			})
			thief.SetNamespace(ownedNS)
			return tenant.Create(ctx, thief)
		}, []string{
			deniedIn("spec.bootstrap.fromBackup.backupName", `get Secret "owned-auth"`),
			deniedIn("spec.bootstrap.fromBackup.backupName", `get Secret "db-password"`)}},
	} {
		checkRefused(t, tc.name, tc.do(), tc.want)
	}
	var backups cachev1beta1.RedisClusterBackupList
	if err := env.k8s.List(ctx, &backups, client.InNamespace(ns)); err != nil || len(backups.Items) > 0 {
		t.Errorf("backups stored in %s: %d (%v)", ns, len(backups.Items), err)
	}
	var clusters cachev1beta1.RedisClusterList
	if err := env.k8s.List(ctx, &clusters, client.InNamespace(ownedNS)); err != nil || len(clusters.Items) != 1 || clusters.Items[0].Spec.Image == "attacker.example.com/evil:7.0.15" {
		t.Errorf("clusters stored in %s: %d (%v), want only the admin's, unchanged", ownedNS, len(clusters.Items), err)
	}

	// The webhooks asked with SubjectAccessReviews; the operator itself
	// read no Secret and minted no token in the namespace.
	// The log is read where it covers this scenario: it holds the
	// tenant's own refused read of the Secret.
	const tenantUser = "system:serviceaccount:" + ns + ":tenant"
	tenantRefused := 0
	files, _ := filepath.Glob(filepath.Join(env.stateDir, "logs", "kube-apiserver-audit*.log"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e auditEvent
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.StageTimestamp.Time.Before(start) || e.ObjectRef == nil || e.ObjectRef.Namespace != ns {
				continue
			}
			if e.User.Username == tenantUser && e.ObjectRef.Resource == "secrets" && e.ResponseStatus != nil && e.ResponseStatus.Code == 403 {
				tenantRefused++
			}
			if e.User.Username != installSA {
				continue
			}
			if e.ObjectRef.Resource == "secrets" || e.ObjectRef.Resource == "serviceaccounts" {
				t.Errorf("the operator did %s %s %s/%s on the tenant's behalf (%s)", e.Verb, e.ObjectRef.Resource, ns, e.ObjectRef.Name, e.RequestURI)
			}
		}
		_ = f.Close()
	}
	if tenantRefused == 0 {
		t.Errorf("the audit logs (%d files) do not show the tenant's refused read of the Secret: they do not cover this scenario", len(files))
	}
}

// checkRefused fails t unless err is the webhook's refusal with, for each
// of want, a cause (field: message) starting with it.
func checkRefused(t *testing.T, name string, err error, want []string) {
	t.Helper()
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		t.Errorf("%s: %v, want the webhook's refusal", name, err)
		return
	}
	var causes []string
	for _, c := range status.Status().Details.Causes {
		causes = append(causes, c.Field+": "+c.Message)
	}
	for _, w := range want {
		if !slices.ContainsFunc(causes, func(c string) bool { return strings.HasPrefix(c, w) }) {
			t.Errorf("%s: %v: causes %q, want one starting with %q", name, err, causes, w)
		}
	}
	t.Logf("refused: %s", name)
}

// tenantClient is a client of the plane authenticated as ServiceAccount sa
// of ns, with a token from the TokenRequest API.
func tenantClient(t *testing.T, ns, sa string) client.Client {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.cfg)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.cfg)
	cfg.BearerToken = tr.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: env.k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
