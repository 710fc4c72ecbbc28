package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup/schedule"
)

// suspendedRecheck is how often a suspended schedule (or one with no
// future time) is looked at again, for retention by age.
const suspendedRecheck = 5 * time.Minute

// retentionRetry is how soon a retention that failed (an expired backup
// whose objects could not be deleted) is tried again.
const retentionRetry = 30 * time.Second

// The scheduled backup controller's RBAC: its own kind and status; it
// creates and deletes the RedisClusterBackups it owns. Those carry its
// controller reference with blockOwnerDeletion, which the
// OwnerReferencesPermissionEnforcement admission plugin (on in OpenShift,
// for example) allows only to a client that may update the schedule's
// finalizers.
//
// +kubebuilder:rbac:groups=cache.redis.io,resources=redisclusterscheduledbackups,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cache.redis.io,resources=redisclusterscheduledbackups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cache.redis.io,resources=redisclusterscheduledbackups/finalizers,verbs=update
// +kubebuilder:rbac:groups=cache.redis.io,resources=redisclusterbackups,verbs=create;delete

// ScheduledReconciler runs RedisClusterScheduledBackups: at each
// scheduled time (package schedule decides which) it creates a
// RedisClusterBackup from the template, unless the schedule's previous
// backup is still Pending or Running (that time is skipped, with a
// Skipped event); it deletes the backups retention expires, objects in
// the store first; and it reports the newest backup's state.
type ScheduledReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	Clock     clock.Clock
	// Vault reads the credentialsVault of the backups retention deletes.
	Vault *VaultKeys
	// Endpoints is where the object stores of the backups retention deletes
	// may point (as Reconciler.Endpoints); the zero value allows every
	// endpoint. A refused endpoint keeps the backup and its objects
	// (RetentionApplied False) and no credential is read for it.
	Endpoints EndpointPolicy
}

// SetupWithManager registers the controller; a change of a backup it owns
// starts a pass of its schedule.
func (r *ScheduledReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor("redis-operator-scheduled-backup")
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("redisclusterscheduledbackup").
		For(&cachev1beta1.RedisClusterScheduledBackup{}).
		Owns(&cachev1beta1.RedisClusterBackup{}).
		WithOptions(opts).
		Complete(r)
}

// Reconcile runs one schedule; see ScheduledReconciler.
func (r *ScheduledReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sb cachev1beta1.RedisClusterScheduledBackup
	if err := r.Client.Get(ctx, req.NamespacedName, &sb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if sb.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	before := sb.DeepCopy()
	result, err := r.reconcile(ctx, &sb)
	if !equality.Semantic.DeepEqual(before.Status, sb.Status) {
		if perr := r.Client.Status().Patch(ctx, &sb, client.MergeFrom(before)); perr != nil {
			err = errors.Join(err, fmt.Errorf("writing the status of RedisClusterScheduledBackup %s: %w", sb.Name, perr))
		}
	}
	return result, err
}

func (r *ScheduledReconciler) reconcile(ctx context.Context, sb *cachev1beta1.RedisClusterScheduledBackup) (ctrl.Result, error) {
	now := r.Clock.Now()
	sb.Status.ObservedGeneration = sb.Generation
	for _, t := range []string{cachev1beta1.ScheduledBackupScheduleValidCondition, cachev1beta1.ScheduledBackupObjectStoreReadyCondition,
		cachev1beta1.ScheduledBackupLastBackupCompleteCondition, cachev1beta1.ScheduledBackupRetentionAppliedCondition} {
		if meta.FindStatusCondition(sb.Status.Conditions, t) == nil {
			r.setCondition(sb, t, metav1.ConditionUnknown, "NotObservedYet", "Not observed yet")
		}
	}
	backups, err := r.owned(ctx, sb)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.observe(sb, backups)
	// A failed retention is told by RetentionApplied and an event, and is
	// tried again after retentionRetry rather than with the error backoff:
	// an object store that is down comes back no sooner for being asked.
	retErr := r.retain(ctx, sb, backups, now)
	finish := func(res ctrl.Result) (ctrl.Result, error) {
		if retErr != nil && (res.RequeueAfter == 0 || res.RequeueAfter > retentionRetry) {
			res.RequeueAfter = retentionRetry
		}
		return res, nil
	}

	sched, err := schedule.Parse(sb.Spec.Schedule)
	if err != nil {
		sb.Status.NextScheduleTime = nil
		r.setCondition(sb, cachev1beta1.ScheduledBackupScheduleValidCondition, metav1.ConditionFalse,
			cachev1beta1.ScheduledBackupInvalidScheduleReason, err.Error())
		// A new spec starts a pass; nothing else can make it parse.
		return finish(ctrl.Result{})
	}
	r.setCondition(sb, cachev1beta1.ScheduledBackupScheduleValidCondition, metav1.ConditionTrue,
		cachev1beta1.ScheduledBackupValidReason, "Schedule "+sb.Spec.Schedule+" parses")
	if sb.Spec.Suspend {
		sb.Status.NextScheduleTime = nil
		return finish(ctrl.Result{RequeueAfter: suspendedRecheck})
	}

	last := sb.CreationTimestamp.Time
	if t := sb.Status.LastScheduleTime; t != nil {
		last = t.Time
	}
	var deadline time.Duration
	if s := sb.Spec.StartingDeadlineSeconds; s != nil {
		deadline = time.Duration(*s) * time.Second
	}
	d := schedule.Decide(sched, last, now, deadline)
	switch {
	case !d.Skipped.IsZero():
		r.Recorder.Eventf(sb, "Warning", "MissedSchedule", "Scheduled time %s missed by more than the starting deadline (%s): not taken",
			d.Skipped.UTC().Format(time.RFC3339), deadline)
		sb.Status.LastScheduleTime = &metav1.Time{Time: d.Skipped}
	case !d.Run.IsZero() && sb.Status.Active != "":
		r.Recorder.Eventf(sb, "Warning", "Skipped", "Scheduled time %s skipped: backup %s is still %s",
			d.Run.UTC().Format(time.RFC3339), sb.Status.Active, phaseOf(backups, sb.Status.Active))
		sb.Status.LastScheduleTime = &metav1.Time{Time: d.Run}
	case !d.Run.IsZero():
		name, err := r.create(ctx, sb, d.Run)
		if err != nil {
			return ctrl.Result{}, err
		}
		sb.Status.LastScheduleTime = &metav1.Time{Time: d.Run}
		sb.Status.Active = name
	}
	if d.Next.IsZero() {
		sb.Status.NextScheduleTime = nil
		return finish(ctrl.Result{RequeueAfter: suspendedRecheck})
	}
	sb.Status.NextScheduleTime = &metav1.Time{Time: d.Next}
	return finish(ctrl.Result{RequeueAfter: max(d.Next.Sub(now), 0) + 100*time.Millisecond})
}

// BackupName is the name of the backup a schedule takes at its scheduled
// time t: <schedule>-<t in Unix seconds>, so that a pass repeated after a
// lost status write finds the backup it created instead of a second one.
func BackupName(scheduleName string, t time.Time) string {
	return fmt.Sprintf("%s-%d", scheduleName, t.Unix())
}

// create makes the backup of scheduled time t, owned by sb and labelled
// with its name; one that exists already (created by a pass whose status
// write was lost) counts as created.
func (r *ScheduledReconciler) create(ctx context.Context, sb *cachev1beta1.RedisClusterScheduledBackup, t time.Time) (string, error) {
	b := &cachev1beta1.RedisClusterBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: sb.Namespace, Name: BackupName(sb.Name, t),
			Labels: map[string]string{cachev1beta1.ScheduledBackupLabel: sb.Name}},
		Spec: *sb.Spec.Template.DeepCopy(),
	}
	if err := controllerutil.SetControllerReference(sb, b, r.Client.Scheme()); err != nil {
		return "", err
	}
	ctrl.LoggerFrom(ctx).Info("Creating the scheduled backup", "backup", b.Name, "scheduled", t.UTC())
	if err := r.Client.Create(ctx, b); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return b.Name, nil
		}
		return "", fmt.Errorf("creating RedisClusterBackup %s: %w", b.Name, err)
	}
	r.Recorder.Eventf(sb, "Normal", "Created", "Backup %s created for scheduled time %s", b.Name, t.UTC().Format(time.RFC3339))
	return b.Name, nil
}

// owned lists the RedisClusterBackups sb created: its label and its
// controller reference (with sb's UID). A backup with the label but no such
// reference (anyone who may create backups can set the label) is not
// sb's: retention never deletes it, and it counts for nothing here.
func (r *ScheduledReconciler) owned(ctx context.Context, sb *cachev1beta1.RedisClusterScheduledBackup) ([]cachev1beta1.RedisClusterBackup, error) {
	var list cachev1beta1.RedisClusterBackupList
	if err := r.Client.List(ctx, &list, client.InNamespace(sb.Namespace),
		client.MatchingLabels{cachev1beta1.ScheduledBackupLabel: sb.Name}); err != nil {
		return nil, fmt.Errorf("listing the backups of schedule %s: %w", sb.Name, err)
	}
	var out []cachev1beta1.RedisClusterBackup
	for _, b := range list.Items {
		if metav1.IsControlledBy(&b, sb) && b.DeletionTimestamp == nil {
			out = append(out, b)
		}
	}
	return out, nil
}

func phaseOf(backups []cachev1beta1.RedisClusterBackup, name string) cachev1beta1.BackupPhase {
	for _, b := range backups {
		if b.Name == name && b.Status.Phase != "" {
			return b.Status.Phase
		}
	}
	return cachev1beta1.BackupPending
}

func (r *ScheduledReconciler) setCondition(sb *cachev1beta1.RedisClusterScheduledBackup, t string, s metav1.ConditionStatus, reason, msg string) {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: sb.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now())})
}
