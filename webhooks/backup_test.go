package webhooks

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup"
)

// TestObjectStoreEndpointPolicy: the operator's endpoint policy
// (--object-store-endpoint-allowlist) refuses a backup's, a schedule's and
// a restore's endpoint outside it, naming the flag; an endpoint that did
// not change is not refused again.
func TestObjectStoreEndpointPolicy(t *testing.T) {
	v := &Validator{ObjectStores: backup.EndpointPolicy{Allowlist: []string{"https://s3.eu-west-1.amazonaws.com"}}}
	store := func(endpoint string) cachev1beta1.ObjectStoreSpec {
		return cachev1beta1.ObjectStoreSpec{Endpoint: endpoint, Bucket: "backups",
			CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: "s3", AccessKeyIDKey: "accessKeyID", SecretAccessKeyKey: "secretAccessKey"}}
	}
	b := func(endpoint string) *cachev1beta1.RedisClusterBackup {
		return &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "nightly"},
			Spec: cachev1beta1.RedisClusterBackupSpec{ClusterName: "cache", ObjectStore: store(endpoint)}}
	}
	const refused = `Forbidden: object store endpoint not allowed: https://169.254.169.254 is not under any prefix of the operator's --object-store-endpoint-allowlist (https://s3.eu-west-1.amazonaws.com)`
	ctx := context.Background()
	if _, err := v.ValidateBackup(ctx, nil, b("https://s3.eu-west-1.amazonaws.com")); err != nil {
		t.Errorf("an allowed endpoint: %v", err)
	}
	if got := causes(t, func() error { _, err := v.ValidateBackup(ctx, nil, b("https://169.254.169.254")); return err }()); len(got) != 1 || got[0] != "spec.objectStore.endpoint: "+refused {
		t.Errorf("backup: causes %q", got)
	}
	sb := &cachev1beta1.RedisClusterScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "daily"},
		Spec: cachev1beta1.RedisClusterScheduledBackupSpec{Schedule: "@daily", Template: b("https://169.254.169.254").Spec}}
	if got := causes(t, func() error { _, err := v.ValidateScheduledBackup(ctx, nil, sb); return err }()); len(got) != 1 || got[0] != "spec.template.objectStore.endpoint: "+refused {
		t.Errorf("schedule: causes %q", got)
	}
	// Stored before the policy: suspending the schedule is not refused.
	suspended := sb.DeepCopy()
	suspended.Spec.Suspend = true
	if _, err := v.ValidateScheduledBackup(ctx, sb, suspended); err != nil {
		t.Errorf("suspending a schedule whose endpoint predates the policy: %v", err)
	}

	restore := func(endpoint string) *cachev1beta1.RedisCluster {
		rc := validHub()
		s := store(endpoint)
		rc.Spec.Bootstrap = &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{ObjectStore: &s, Path: "default/cache/nightly"}}
		return rc
	}
	got := causes(t, func() error { _, err := v.ValidateV1beta1(ctx, nil, restore("https://169.254.169.254")); return err }())
	if len(got) != 1 || got[0] != "spec.bootstrap.fromBackup.objectStore.endpoint: "+refused {
		t.Errorf("restore: causes %q", got)
	}
	old := restore("https://169.254.169.254")
	scaled := old.DeepCopy()
	scaled.Spec.Shards = 4
	if _, err := v.ValidateV1beta1(ctx, old, scaled); err != nil && strings.Contains(err.Error(), "endpoint") {
		t.Errorf("scaling a cluster restored from an endpoint that predates the policy: %v", err)
	}
}
