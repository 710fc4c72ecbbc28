package webhooks

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestTenantEditsOthersObjects is the second half of the attacker's
// afternoon, found by a review from outside: "tenant" may edit this API's
// three kinds and nothing else, and edits objects "trusted" set up, or
// creates ones that lean on them, to make the operator read or expose
// what trusted may and tenant may not. Each attempt is refused with the
// field and the Role that would allow it; trusted makes the same change.
func TestTenantEditsOthersObjects(t *testing.T) {
	admin := startAPIServer(t)
	ctx := context.Background()
	ns, tenant, trusted := tenantNamespace(t, admin, "edits", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"services", "pods"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"get"}},
	})
	forbidden := func(path, what string) string {
		return path + `: Forbidden: user "tenant" may not ` + what + ` in namespace "` + ns + `"`
	}
	store := func() cachev1beta1.ObjectStoreSpec {
		return cachev1beta1.ObjectStoreSpec{Endpoint: "https://s3.example.com", Bucket: "backups", Region: "us-east-1",
			CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: "db-password", AccessKeyIDKey: "username", SecretAccessKeyKey: "password"}}
	}
	cluster := func(name string, mutate func(*cachev1beta1.RedisCluster)) *cachev1beta1.RedisCluster {
		rc := validHub()
		rc.Namespace, rc.Name = ns, name
		rc.Spec.Storage.DeleteClaimPolicy = cachev1beta1.DeleteClaimDelete
		if mutate != nil {
			mutate(rc)
		}
		return rc
	}
	// trusted's objects.
	victim := cluster("victim", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.TLS = &cachev1beta1.TLSSpec{Enabled: true, SecretName: "admin-tls", AuthClients: cachev1beta1.TLSAuthClientsRequired}
		rc.Spec.NetworkPolicy = &cachev1beta1.NetworkPolicySpec{Enabled: true}
	})
	vaulted := cluster("vaulted", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth = &cachev1beta1.AuthSpec{Vault: &cachev1beta1.VaultSource{Address: "https://vault.vault.svc:8200",
			Path: "redis/prod", Role: "redis", ServiceAccountName: "ci-deployer"}}
	})
	daily := &cachev1beta1.RedisClusterScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "daily"},
		Spec: cachev1beta1.RedisClusterScheduledBackupSpec{Schedule: "0 3 * * *",
			Template: cachev1beta1.RedisClusterBackupSpec{ClusterName: "victim", ObjectStore: store()}}}
	nightly := &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: cachev1beta1.RedisClusterBackupSpec{ClusterName: "victim", ObjectStore: store()}}
	for _, obj := range []client.Object{victim, vaulted, daily, nightly} {
		if err := trusted.Create(ctx, obj); err != nil {
			t.Fatalf("trusted creating %s: %v", obj.GetName(), err)
		}
	}
	// A claim a deleted RedisCluster "retained" left behind.
	size := resource.MustParse("1Gi")
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data-retained-shard-0-0",
		Labels: map[string]string{resources.LabelCluster: "retained"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}}}
	unlabelled := claim.DeepCopy()
	unlabelled.Name, unlabelled.Labels = "data-nolabel-shard-0-0", nil
	for _, c := range []client.Object{claim, unlabelled} {
		if err := admin.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}

	edit := func(obj client.Object, mutate func()) func(c client.Client) error {
		return func(c client.Client) error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			mutate()
			return c.Update(ctx, obj)
		}
	}
	create := func(make func() client.Object) func(c client.Client) error {
		return func(c client.Client) error { return c.Create(ctx, make()) }
	}
	victimRC := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "victim"}}
	vaultedRC := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vaulted"}}
	dailySB := &cachev1beta1.RedisClusterScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "daily"}}
	cases := []struct {
		name string
		do   func(c client.Client) error
		want []string
	}{
		{"image on another's cluster", edit(victimRC, func() { victimRC.Spec.Image = "attacker.example.com/evil:7.0.15" }), []string{
			forbidden("spec.image", `get Secret "victim-auth"`) + `, and image "attacker.example.com/evil:7.0.15" would run in the Redis pods`,
			forbidden("spec.image", `get Secret "admin-tls"`),
		}},
		{"exporter image on another's cluster", edit(victimRC, func() {
			victimRC.Spec.Exporter = cachev1beta1.ExporterSpec{Enabled: true, Image: "attacker.example.com/evil-exporter:1"}
		}), []string{
			forbidden("spec.exporter.image", `get Secret "victim-auth"`),
			forbidden("spec.exporter.image", `get Secret "admin-tls"`),
		}},
		{"the slow log made to keep every command", edit(victimRC, func() {
			victimRC.Spec.Config["slowlog-log-slower-than"] = "0"
			victimRC.Spec.Config["slowlog-max-len"] = "1000000"
		}), []string{
			forbidden("spec.config[slowlog-log-slower-than]", `get Secret "victim-auth"`) + ", and the slow log keeps commands with their arguments",
		}},
		{"another's NetworkPolicy turned off", edit(victimRC, func() { victimRC.Spec.NetworkPolicy.Enabled = false }), []string{
			forbidden("spec.networkPolicy", `get Secret "victim-auth"`) + ", and the cluster's NetworkPolicy keeps every pod but its own off the cluster bus",
		}},
		{"auth turned off on another's cluster", edit(victimRC, func() { victimRC.Spec.Auth = &cachev1beta1.AuthSpec{Disabled: true} }), []string{
			forbidden("spec.auth.disabled", `get Secret "victim-auth"`) + ", and anyone who reaches the Redis pods could read every key",
		}},
		{"per-pod Services on another's cluster", edit(victimRC, func() {
			victimRC.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true, Type: corev1.ServiceTypeClusterIP}
		}), []string{
			forbidden("spec.externalAccess.enabled", "create services") + ", and the operator would create a Service of type ClusterIP for every Redis pod",
		}},
		{"exposed outside the cluster", edit(victimRC, func() {
			victimRC.Spec.Service = &cachev1beta1.ClientServiceSpec{Type: corev1.ServiceTypeLoadBalancer}
			victimRC.Spec.ExternalAccess = &cachev1beta1.ExternalAccessSpec{Enabled: true, Type: corev1.ServiceTypeLoadBalancer}
		}), []string{
			// One permission, one review: named once, at the first field.
			forbidden("spec.service.type", "create services") + ", and the operator would create the client Service as type LoadBalancer",
		}},
		{"Vault login reads another path", edit(vaultedRC, func() { vaultedRC.Spec.Auth.Vault.Path = "platform/admin" }), []string{
			forbidden("spec.auth.vault.serviceAccountName", `create serviceaccounts/token for ServiceAccount "ci-deployer"`) +
				`, and the operator would request a token of it (audience "vault") and send it to https://vault.vault.svc:8200, logging in as role "redis" to read secret/platform/admin`,
			forbidden("spec.auth", `get Secret "vaulted-auth"`) + ", and the cluster's password would be taken from the new source",
		}},
		{"Vault login as another role", edit(vaultedRC, func() { vaultedRC.Spec.Auth.Vault.Role = "platform-admin" }), []string{
			forbidden("spec.auth.vault.serviceAccountName", `create serviceaccounts/token for ServiceAccount "ci-deployer"`),
		}},
		{"schedule writes to another bucket", edit(dailySB, func() {
			dailySB.Spec.Template.ObjectStore.Bucket = "tenant-public-bucket"
			dailySB.Spec.Template.ObjectStore.Prefix = "loot"
		}), []string{
			forbidden("spec.template.objectStore.credentialsSecretRef.name", `get Secret "db-password"`) +
				`, and the operator would sign requests to https://s3.example.com (bucket "tenant-public-bucket", prefix "loot")`,
		}},
		{"restore of another's backup by name", create(func() client.Object {
			return cluster("thief", func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Auth = &cachev1beta1.AuthSpec{Disabled: true}
				rc.Spec.Bootstrap = &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{BackupName: "nightly"}}
			})
		}), []string{
			forbidden("spec.bootstrap.fromBackup.backupName", `get Secret "victim-auth"`) + ", and restoring RedisClusterBackup nightly reads what it holds: a backup copies every key",
			forbidden("spec.bootstrap.fromBackup.backupName", `get Secret "db-password"`) + ", and restoring RedisClusterBackup nightly reads what it holds: the operator would sign requests",
		}},
		{"a new cluster taking a retained claim without the cluster's label", create(func() client.Object {
			return cluster("nolabel", nil)
		}), []string{
			forbidden("metadata.name", `get PersistentVolumeClaim "data-nolabel-shard-0-0"`),
		}},
		{"an ACL user added to another's cluster", edit(victimRC, func() {
			victimRC.Spec.Users = append(victimRC.Spec.Users, cachev1beta1.UserSpec{Name: "mine", Rules: "~* &* +@all",
				PasswordFrom: cachev1beta1.UserPasswordSource{SecretRef: &cachev1beta1.SecretKeySelector{Name: "mine", Key: "password"}}})
		}), []string{
			forbidden("spec.users", `get Secret "victim-auth"`) + ", and a new ACL user, or new rules for one, reads or writes the keys its rules allow",
			forbidden("spec.users[0].passwordFrom.secretRef.name", `get Secret "mine"`),
		}},
		{"another's user given every key", edit(victimRC, func() { victimRC.Spec.Users[0].Rules = "~* &* +@all +@dangerous" }), []string{
			forbidden("spec.users", `get Secret "victim-auth"`),
		}},
		{"client certificates no longer required", edit(victimRC, func() { victimRC.Spec.TLS.AuthClients = cachev1beta1.TLSAuthClientsNone }), []string{
			forbidden("spec.tls.authClients", `get Secret "victim-auth"`) + ", and clients without a certificate of the cluster's CA would be let in",
			forbidden("spec.tls.authClients", `get Secret "admin-tls"`),
		}},
		{"the plain-text port opened", edit(victimRC, func() { victimRC.Spec.TLS.PlainPort = true }), []string{
			forbidden("spec.tls.plainPort", `get Secret "victim-auth"`),
			forbidden("spec.tls.plainPort", `get Secret "admin-tls"`),
		}},
		{"a new cluster taking a retained claim", create(func() client.Object {
			return cluster("retained", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Auth = &cachev1beta1.AuthSpec{Disabled: true} })
		}), []string{
			forbidden("metadata.name", `get PersistentVolumeClaim "data-retained-shard-0-0"`) + ", and a RedisCluster of this name left it behind",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkTenantCauses(t, apiCauses(t, tc.do(tenant)), tc.want)
			if err := tc.do(trusted); err != nil {
				t.Fatalf("trusted: %v", err)
			}
		})
	}

	// v1beta1 status rides in v1alpha1's conversion annotation: a write may
	// not change it, on create nor on update; a patch that keeps it passes.
	smuggled := `{"status":{"phase":"Ready","formedTime":"2020-01-01T00:00:00Z","leavingShards":["own-shard-9"]}}`
	own := &cachev1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own",
		Annotations: map[string]string{cachev1alpha1.ConversionDataAnnotation: smuggled}},
		Spec: cachev1alpha1.RedisClusterSpec{Replicas: 6}}
	const carried = "metadata.annotations[cache.redis.io/conversion-data]: Forbidden: its status part is the operator's"
	if causes := apiCauses(t, tenant.Create(ctx, own.DeepCopy())); !hasCause(causes, carried) {
		t.Errorf("tenant creating a v1alpha1 cluster carrying a status: causes %q, want one starting with %q", causes, carried)
	}
	delete(own.Annotations, cachev1alpha1.ConversionDataAnnotation)
	if err := tenant.Create(ctx, own); err != nil {
		t.Fatalf("tenant creating a plain v1alpha1 cluster: %v", err)
	}
	read := &cachev1alpha1.RedisCluster{}
	if err := tenant.Get(ctx, client.ObjectKeyFromObject(own), read); err != nil {
		t.Fatal(err)
	}
	relabelled := read.DeepCopy()
	relabelled.Labels = map[string]string{"team": "cache"}
	if err := tenant.Update(ctx, relabelled); err != nil {
		t.Errorf("tenant relabelling a v1alpha1 cluster, annotation kept as read: %v", err)
	}
	if err := tenant.Get(ctx, client.ObjectKeyFromObject(own), read); err != nil {
		t.Fatal(err)
	}
	// The spec part as read, the status part made up.
	var data map[string]any
	if err := json.Unmarshal([]byte(read.Annotations[cachev1alpha1.ConversionDataAnnotation]), &data); err != nil {
		t.Fatal(err)
	}
	data["status"] = map[string]any{"phase": "Ready", "formedTime": "2020-01-01T00:00:00Z", "leavingShards": []string{"own-shard-9"}}
	forged, _ := json.Marshal(data)
	read.Annotations[cachev1alpha1.ConversionDataAnnotation] = string(forged)
	if causes := apiCauses(t, tenant.Update(ctx, read)); len(causes) != 1 || !strings.HasPrefix(causes[0], carried) {
		t.Errorf("tenant rewriting a v1alpha1 cluster's carried status: causes %q, want one starting with %q", causes, carried)
	}
	stored := &cachev1beta1.RedisCluster{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(own), stored); err != nil || stored.Status.FormedTime != nil || len(stored.Status.LeavingShards) > 0 {
		t.Errorf("stored status %+v (%v): want none of the smuggled one", stored.Status, err)
	}

	// A tenant with a Secret of its own (what an application team has):
	// it may not make it the source of another's passwords, nor swap the
	// certificate and CA the other's pods trust.
	if err := admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own-secret"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"tenant-own"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, binding(ns, "tenant-own-secret", "own-secret", "tenant")); err != nil {
		t.Fatal(err)
	}
	ownSecret := &cachev1beta1.SecretKeySelector{Name: "tenant-own", Key: "password"}
	for name, tc := range map[string]struct {
		mutate func()
		want   string
	}{
		"the cluster's password from the tenant's Secret": {func() { victimRC.Spec.Auth = &cachev1beta1.AuthSpec{SecretRef: ownSecret} },
			forbidden("spec.auth", `get Secret "victim-auth"`) + ", and the cluster's password would be taken from the new source"},
		"a user's password from the tenant's Secret": {func() { victimRC.Spec.Users[0].PasswordFrom = cachev1beta1.UserPasswordSource{SecretRef: ownSecret} },
			forbidden("spec.users", `get Secret "victim-auth"`)},
		"the pods' certificate and CA from the tenant's Secret": {func() { victimRC.Spec.TLS.SecretName = "tenant-own" },
			forbidden("spec.tls.secretName", `get Secret "victim-auth"`) + ", and the Redis pods would trust the clients the new Secret's CA signs"},
		"keyspace notifications turned on": {func() { victimRC.Spec.Config["notify-keyspace-events"] = "KEA" },
			forbidden("spec.config[notify-keyspace-events]", `get Secret "victim-auth"`)},
	} {
		if causes := apiCauses(t, edit(victimRC, tc.mutate)(tenant)); !hasCause(causes, tc.want) {
			t.Errorf("%s: causes %q, want one starting with %q", name, causes, tc.want)
		}
	}

	// A schedule's retention deletes what it owns from the store: a backup
	// cannot be made the schedule's later, and shortening retention asks
	// for the store's credentials.
	var sched cachev1beta1.RedisClusterScheduledBackup
	if err := trusted.Get(ctx, client.ObjectKeyFromObject(daily), &sched); err != nil {
		t.Fatal(err)
	}
	err := edit(nightly, func() {
		nightly.Labels = map[string]string{cachev1beta1.ScheduledBackupLabel: "daily"}
		nightly.OwnerReferences = []metav1.OwnerReference{{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "RedisClusterScheduledBackup",
			Name: "daily", UID: sched.UID, Controller: ptr.To(true)}}
	})(tenant)
	if causes := apiCauses(t, err); !hasCause(causes, "metadata: Forbidden: which schedule owns a backup") {
		t.Errorf("a backup made a schedule's: causes %q", causes)
	}
	err = edit(dailySB, func() { dailySB.Spec.Retention = cachev1beta1.RetentionPolicy{KeepLast: 1} })(tenant)
	if causes := apiCauses(t, err); !hasCause(causes, forbidden("spec.retention", `get Secret "db-password"`)+", and retention deletes the schedule's backups") {
		t.Errorf("a schedule's retention shortened: causes %q", causes)
	}

	// A restore is chosen with the cluster: not added later, by anyone (a
	// paused cluster never formed, so it would restore).
	paused := cluster("paused", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Paused = true })
	if err := tenant.Create(ctx, paused); err != nil {
		t.Fatalf("tenant creating its own paused cluster: %v", err)
	}
	for _, c := range []client.Client{tenant, trusted} {
		err := edit(paused, func() {
			paused.Spec.Paused = false
			paused.Spec.Bootstrap = &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{BackupName: "nightly"}}
		})(c)
		if causes := apiCauses(t, err); !hasCause(causes, "spec.bootstrap: Forbidden: is set when the RedisCluster is created") {
			t.Errorf("bootstrap added to an existing cluster: causes %q", causes)
		}
	}
	// A parameter this operator does not know, that would choose what
	// clients are told: refused to everyone.
	err = edit(victimRC, func() { victimRC.Spec.Config["cluster-announce-client-ipv4"] = "203.0.113.7" })(trusted)
	if causes := apiCauses(t, err); !hasCause(causes, `spec.config[cluster-announce-client-ipv4]: Forbidden: "cluster-announce-client-ipv4" is not a parameter this operator knows`) {
		t.Errorf("an unknown announce parameter: causes %q", causes)
	}

	// What stays open to the tenant: editing other fields of another's
	// cluster.
	if err := edit(victimRC, func() {
		victimRC.Spec.Config["maxmemory-policy"] = "noeviction"
		victimRC.Spec.Shards = 4
	})(tenant); err != nil {
		t.Errorf("tenant changing a config key and the shard count: %v", err)
	}
}
