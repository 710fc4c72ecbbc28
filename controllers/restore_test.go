package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup"
)

// TestRestoreLoginIsTheBackedUpClusters: an empty serviceAccountName of a
// restore's credentialsVault logs in as the backed-up cluster's account
// when the restore names a RedisClusterBackup (what that backup's own login
// used, and what the webhook asked the user to be allowed to mint), never
// as an account named after the new cluster, which its creator chooses;
// with an object store in the spec, as the restored cluster's.
func TestRestoreLoginIsTheBackedUpClusters(t *testing.T) {
	b := &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "nightly", UID: "b-uid"},
		Spec: cachev1beta1.RedisClusterBackupSpec{ClusterName: "demo", ObjectStore: cachev1beta1.ObjectStoreSpec{
			Endpoint: "https://s3.example.com", Bucket: "backups",
			CredentialsVault: &cachev1beta1.ObjectStoreVaultCredentials{Vault: cachev1beta1.VaultSource{Address: "https://vault:8200", Path: "s3"}}}}}
	path, err := backup.ExpectedPath(b)
	if err != nil {
		t.Fatal(err)
	}
	b.Status = cachev1beta1.RedisClusterBackupStatus{Phase: cachev1beta1.BackupCompleted, Path: path}
	r := &RedisClusterReconciler{Client: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(b).Build()}

	byName := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "ci-deployer"},
		Spec: cachev1beta1.RedisClusterSpec{Bootstrap: &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{BackupName: "nightly"}}}}
	if _, _, _, login, err := r.restoreSource(context.Background(), byName); err != nil || login != "demo" {
		t.Errorf("restore by backupName: login %q (%v), want the backed-up cluster's demo", login, err)
	}
	byStore := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "restored"},
		Spec: cachev1beta1.RedisClusterSpec{Bootstrap: &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{
			ObjectStore: &b.Spec.ObjectStore, Path: path}}}}
	if _, _, _, login, err := r.restoreSource(context.Background(), byStore); err != nil || login != "restored" {
		t.Errorf("restore from an object store: login %q (%v), want the restored cluster's", login, err)
	}
}
