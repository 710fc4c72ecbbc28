package webhooks

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestCheckRestore: a new cluster restoring from a named backup is refused
// at admission, with backupName named, when the backup does not exist,
// failed, has another shard count or was taken with a newer Redis than the
// image; a backup still running or one that fits is accepted, as is an
// object store with credentialsVault, and an update is never checked (the
// restore happened at create).
func TestCheckRestore(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := cachev1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	backup := func(name string, phase cachev1beta1.BackupPhase, shards int, version, message string) *cachev1beta1.RedisClusterBackup {
		b := &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
			Status: cachev1beta1.RedisClusterBackupStatus{Phase: phase, RedisVersion: version}}
		for range shards {
			b.Status.Shards = append(b.Status.Shards, cachev1beta1.BackupShardStatus{})
		}
		if message != "" {
			b.Status.Conditions = []metav1.Condition{{Type: cachev1beta1.BackupCompleteCondition, Status: metav1.ConditionFalse,
				Reason: cachev1beta1.BackupFailedReason, Message: message}}
		}
		return b
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		backup("nightly", cachev1beta1.BackupCompleted, 3, "7.0.15", ""),
		backup("five", cachev1beta1.BackupCompleted, 5, "7.0.15", ""),
		backup("newer", cachev1beta1.BackupCompleted, 3, "7.2.4", ""),
		backup("broken", cachev1beta1.BackupFailed, 0, "", "3 attempts made, none completed"),
		backup("running", cachev1beta1.BackupRunning, 0, "", ""),
	).Build()
	v := &Validator{Backups: reader}

	for _, tc := range []struct {
		backup, image string
		want          string // "" accepted; else a substring of the error
	}{
		{"nightly", "redis:7.0.15", ""},
		{"running", "redis:7.0.15", ""},
		{"absent", "redis:7.0.15", `spec.bootstrap.fromBackup.backupName: Not found: "absent"`},
		{"broken", "redis:7.0.15", "spec.bootstrap.fromBackup.backupName: Invalid value: \"broken\": the backup failed: 3 attempts made, none completed"},
		{"five", "redis:7.0.15", "the backup has 5 shards and spec.shards is 3: restore with spec.shards 5, then scale"},
		{"newer", "redis:7.0.15", "the backup was taken with Redis 7.2.4, newer than image redis:7.0.15"},
	} {
		rc := validHub()
		rc.Spec.Image = tc.image
		rc.Spec.Bootstrap = &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{BackupName: tc.backup}}
		_, err := v.ValidateV1beta1(context.Background(), nil, rc)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("restore from %s: refused: %v", tc.backup, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("restore from %s: %v, want an error with %q", tc.backup, err, tc.want)
		}
		// The same spec on update (the cluster exists): not checked again.
		if _, err := v.ValidateV1beta1(context.Background(), rc.DeepCopy(), rc); err != nil && strings.Contains(err.Error(), "backupName") {
			t.Errorf("update of a cluster restored from %s: %v", tc.backup, err)
		}
	}

	// An object store whose keys are in Vault: the controller reads them.
	rc := validHub()
	rc.Spec.Bootstrap = &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{Path: "p/ns/c/b",
		ObjectStore: &cachev1beta1.ObjectStoreSpec{Endpoint: "https://s3.example.com", Bucket: "backups",
			CredentialsVault: &cachev1beta1.ObjectStoreVaultCredentials{Vault: *vaultAuth().Vault}}}}
	if _, err := v.ValidateV1beta1(context.Background(), nil, rc); err != nil {
		t.Errorf("restore with credentialsVault: refused: %v", err)
	}
}
