package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup/schedule"
)

// observe sets the status that follows from the schedule's backups: the
// active one, the newest Completed one, LastBackupComplete (the newest
// finished backup) and ObjectStoreReady (the newest backup's).
func (r *ScheduledReconciler) observe(sb *cachev1beta1.RedisClusterScheduledBackup, backups []cachev1beta1.RedisClusterBackup) {
	sorted := slices.Clone(backups)
	slices.SortFunc(sorted, func(a, b cachev1beta1.RedisClusterBackup) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	sb.Status.Active = ""
	var finished, succeeded *cachev1beta1.RedisClusterBackup
	for i := range sorted {
		b := &sorted[i]
		switch b.Status.Phase {
		case cachev1beta1.BackupCompleted:
			if succeeded == nil {
				succeeded = b
			}
			if finished == nil {
				finished = b
			}
		case cachev1beta1.BackupFailed:
			if finished == nil {
				finished = b
			}
		default:
			if sb.Status.Active == "" {
				sb.Status.Active = b.Name
			}
		}
	}
	if succeeded != nil {
		sb.Status.LastSuccessfulBackup = succeeded.Name
		sb.Status.LastSuccessfulTime = succeeded.Status.EndTime.DeepCopy()
	}
	switch {
	case finished == nil:
		r.setCondition(sb, cachev1beta1.ScheduledBackupLastBackupCompleteCondition, metav1.ConditionUnknown,
			cachev1beta1.ScheduledBackupNoBackupYetReason, "No backup of this schedule finished yet")
	case finished.Status.Phase == cachev1beta1.BackupCompleted:
		r.setCondition(sb, cachev1beta1.ScheduledBackupLastBackupCompleteCondition, metav1.ConditionTrue,
			cachev1beta1.BackupCompletedReason, "Backup "+finished.Name+" completed")
	default:
		msg := "Backup " + finished.Name + " failed"
		if c := meta.FindStatusCondition(finished.Status.Conditions, cachev1beta1.BackupCompleteCondition); c != nil {
			msg += ": " + c.Message
		}
		r.setCondition(sb, cachev1beta1.ScheduledBackupLastBackupCompleteCondition, metav1.ConditionFalse,
			cachev1beta1.BackupFailedReason, msg)
	}
	if len(sorted) == 0 {
		r.setCondition(sb, cachev1beta1.ScheduledBackupObjectStoreReadyCondition, metav1.ConditionUnknown,
			cachev1beta1.ScheduledBackupNoBackupYetReason, "No backup of this schedule yet")
		return
	}
	newest := &sorted[0]
	if c := meta.FindStatusCondition(newest.Status.Conditions, cachev1beta1.BackupObjectStoreReadyCondition); c != nil {
		r.setCondition(sb, cachev1beta1.ScheduledBackupObjectStoreReadyCondition, c.Status, c.Reason,
			"Backup "+newest.Name+": "+c.Message)
	}
}

// retain deletes the backups the retention policy expires (package
// schedule's Expired): for each, the objects under its path in the store,
// then the RedisClusterBackup. A backup whose objects cannot be deleted is
// kept (its RedisClusterBackup is the only record of where they are), and
// RetentionApplied says why.
func (r *ScheduledReconciler) retain(ctx context.Context, sb *cachev1beta1.RedisClusterScheduledBackup,
	backups []cachev1beta1.RedisClusterBackup, now time.Time) error {
	policy := schedule.Policy{KeepLast: int(sb.Spec.Retention.KeepLast)}
	if policy.KeepLast <= 0 {
		policy.KeepLast = 7
	}
	if a := sb.Spec.Retention.MaxAge; a != nil {
		policy.MaxAge = a.Duration
	}
	in := make([]schedule.Backup, 0, len(backups))
	byName := map[string]*cachev1beta1.RedisClusterBackup{}
	for i := range backups {
		b := &backups[i]
		sbk := schedule.Backup{Name: b.Name, Phase: b.Status.Phase, Created: b.CreationTimestamp.Time}
		if b.Status.EndTime != nil {
			sbk.Ended = b.Status.EndTime.Time
		}
		in = append(in, sbk)
		byName[b.Name] = b
	}
	var errs []error
	deleted := 0
	for _, name := range schedule.Expired(in, policy, now) {
		if err := r.deleteBackup(ctx, sb, byName[name]); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted++
	}
	if err := errors.Join(errs...); err != nil {
		// One event when retention starts failing, not one per retry.
		if c := meta.FindStatusCondition(sb.Status.Conditions, cachev1beta1.ScheduledBackupRetentionAppliedCondition); c == nil ||
			c.Reason != cachev1beta1.ScheduledBackupDeleteFailedReason {
			r.Recorder.Eventf(sb, "Warning", "RetentionFailed", "Deleting expired backups: %v", err)
		}
		r.setCondition(sb, cachev1beta1.ScheduledBackupRetentionAppliedCondition, metav1.ConditionFalse,
			cachev1beta1.ScheduledBackupDeleteFailedReason, err.Error())
		return err
	}
	msg := fmt.Sprintf("Keeping the last %d Completed backups", policy.KeepLast)
	if policy.MaxAge > 0 {
		msg += fmt.Sprintf(", none older than %s", policy.MaxAge)
	}
	r.setCondition(sb, cachev1beta1.ScheduledBackupRetentionAppliedCondition, metav1.ConditionTrue,
		cachev1beta1.ScheduledBackupAppliedReason, msg)
	return nil
}

// deleteBackup deletes b's objects (everything under status.path + "/")
// and then b. Only a status.path that is the one the backup controller
// writes b to (<prefix>/<namespace>/<cluster>/<backup> of b's own spec and
// names, CheckRecordedPath) is deleted: any other (an edited status, or one
// recorded before the path rules) keeps the backup and its objects, with
// the reason in the error.
func (r *ScheduledReconciler) deleteBackup(ctx context.Context, sb *cachev1beta1.RedisClusterScheduledBackup, b *cachev1beta1.RedisClusterBackup) error {
	n := 0
	if b.Status.Path != "" {
		if err := CheckRecordedPath(b); err != nil {
			return fmt.Errorf("backup %s is kept: %w", b.Name, err)
		}
		store, _, err := OpenStoreVault(ctx, r.APIReader, r.Endpoints, r.Vault, b.Namespace, b.Spec.ClusterName, &b.Spec.ObjectStore)
		if err != nil {
			return fmt.Errorf("backup %s: %w", b.Name, err)
		}
		if n, err = store.RemovePrefix(ctx, b.Status.Path+"/"); err != nil {
			return fmt.Errorf("backup %s: deleting its objects: %w", b.Name, err)
		}
	}
	ctrl.LoggerFrom(ctx).Info("Deleting an expired backup", "backup", b.Name, "objects", n)
	if err := r.Client.Delete(ctx, b, client.Preconditions{UID: &b.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting RedisClusterBackup %s: %w", b.Name, err)
	}
	r.Recorder.Eventf(sb, "Normal", "Deleted", "Expired backup %s deleted with its %d objects under %s", b.Name, n, b.Status.Path)
	return nil
}
