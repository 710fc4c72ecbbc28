package webhooks

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup"
)

// checkRestore rejects, on create, a spec.bootstrap.fromBackup.backupName
// that names no RedisClusterBackup of the namespace, one whose data and
// object store the user may not read (what creating that backup would
// ask: get its cluster's auth Secret, its store's credentials), a Failed one, or a
// Completed one that cannot bootstrap this spec (backup.CheckRestorable:
// another shard count, a newer Redis than the image's). A backup still
// running is accepted (the controller waits for it); a backup given by
// object store and path is checked by the controller, which reads its
// manifest. Without Backups nothing is checked.
func (v *Validator) checkRestore(ctx context.Context, old, obj *cachev1beta1.RedisCluster, r *result) error {
	if v.Backups == nil || old != nil || obj.Spec.Bootstrap == nil || obj.Spec.Bootstrap.FromBackup == nil ||
		obj.Spec.Bootstrap.FromBackup.BackupName == "" {
		return nil
	}
	p := field.NewPath("spec", "bootstrap", "fromBackup", "backupName")
	name := obj.Spec.Bootstrap.FromBackup.BackupName
	var b cachev1beta1.RedisClusterBackup
	if err := v.Backups.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: name}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			r.add(field.NotFound(p, name))
			return nil
		}
		return apierrors.NewInternalError(fmt.Errorf("reading RedisClusterBackup %s: %w", name, err))
	}
	// Restoring reads what the backup read: every key of its cluster, with
	// its object store's keys (backupAccessChecks, as if the user created
	// that backup).
	if v.Access != nil {
		checks := backupAccessChecks(obj.Namespace, field.NewPath("spec", "bootstrap", "fromBackup", "backupName"), nil, &b.Spec)
		for i := range checks {
			checks[i].path = p
			checks[i].consequence = fmt.Sprintf("restoring RedisClusterBackup %s reads what it holds: %s", name, checks[i].consequence)
		}
		denied, err := reviewAccess(ctx, v.Access, checks)
		if err != nil {
			return err
		}
		r.add(denied...)
	}
	switch b.Status.Phase {
	case cachev1beta1.BackupFailed:
		r.add(field.Invalid(p, name, "the backup failed: "+conditionMessage(&b)))
	case cachev1beta1.BackupCompleted:
		if err := backup.CheckRestorable(len(b.Status.Shards), b.Status.RedisVersion, obj.Spec.Shards, obj.Spec.Image); err != nil {
			r.add(field.Invalid(p, name, err.Error()))
		}
	}
	return nil
}

func conditionMessage(b *cachev1beta1.RedisClusterBackup) string {
	for _, c := range b.Status.Conditions {
		if c.Type == cachev1beta1.BackupCompleteCondition {
			return c.Message
		}
	}
	return ""
}

// checkRestoreEndpoint applies the operator's object-store endpoint policy
// to spec.bootstrap.fromBackup.objectStore.endpoint when it is new or
// changed over old (nil when new): a restore sends signed requests there.
// Its Vault login is checkVaultAddress's (vaultLogins).
func (v *Validator) checkRestoreEndpoint(old, obj *cachev1beta1.RedisCluster, r *result) {
	s := restoreStore(obj)
	if v.ObjectStores == nil || s == nil {
		return
	}
	if os := restoreStore(old); os != nil && os.Endpoint == s.Endpoint {
		return
	}
	if err := v.ObjectStores.Check(s.Endpoint); err != nil {
		r.add(field.Forbidden(field.NewPath("spec", "bootstrap", "fromBackup", "objectStore", "endpoint"), err.Error()))
	}
}
