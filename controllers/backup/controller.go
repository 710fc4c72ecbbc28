package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// Defaults of the Reconciler.
const (
	// DefaultMaxAttempts is how many attempts a backup gets: an attempt cut
	// short by an operator restart, or failed, is started again from the
	// beginning until then.
	DefaultMaxAttempts = 3
	// DefaultAttemptTimeout bounds one attempt (every shard's stream).
	DefaultAttemptTimeout = 2 * time.Hour
	// retryPending is the wait before looking again at a backup that cannot
	// start (cluster not ready, object store refusing).
	retryPending = 15 * time.Second
)

// The backup controller's RBAC: its own kind and status; it reads
// RedisClusters, their pods and Secrets under the RedisCluster
// controller's rules.
//
// +kubebuilder:rbac:groups=cache.redis.io,resources=redisclusterbackups,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cache.redis.io,resources=redisclusterbackups/status,verbs=get;update;patch

// Reconciler takes RedisClusterBackups: for a new backup it checks the
// object store, reads every shard's RDB from a replica (the master only
// for a shard without one, with a Warning event) straight into the bucket,
// and writes the manifest last. Completed and Failed are final.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  record.EventRecorder
	Clock     clock.Clock
	// MaxAttempts: DefaultMaxAttempts when not positive.
	MaxAttempts int32
	// AttemptTimeout: DefaultAttemptTimeout when not positive.
	AttemptTimeout time.Duration
	// IdleTimeout bounds a node's silence while streaming: DefaultIdleTimeout when not positive.
	IdleTimeout time.Duration
	// Vault reads credentialsVault; nil leaves such backups Pending with
	// ObjectStoreReady False (InvalidConfig).
	Vault *VaultKeys
	// ProgressInterval is how often status.progress is written while
	// streaming: DefaultProgressInterval when not positive.
	ProgressInterval time.Duration
	// Endpoints is where spec.objectStore.endpoint may point (flags
	// --object-store-endpoint-allowlist and --object-store-allow-insecure-http);
	// the zero value allows every endpoint. A refused endpoint fails the
	// backup (EndpointNotAllowed) before any Secret or Vault secret is read
	// and before any request is sent.
	Endpoints EndpointPolicy
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor("redis-operator-backup")
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = DefaultMaxAttempts
	}
	if r.AttemptTimeout <= 0 {
		r.AttemptTimeout = DefaultAttemptTimeout
	}
	if r.IdleTimeout <= 0 {
		r.IdleTimeout = DefaultIdleTimeout
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("redisclusterbackup").
		For(&cachev1beta1.RedisClusterBackup{}).
		WithOptions(opts).
		Complete(r)
}

// Reconcile takes one backup; see Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b cachev1beta1.RedisClusterBackup
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if b.Status.Phase == cachev1beta1.BackupCompleted || b.Status.Phase == cachev1beta1.BackupFailed {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	before := b.DeepCopy()
	var result ctrl.Result
	var err error
	if perr := r.initStatus(&b); perr != nil {
		// A path that could reach outside the backup's own (an object
		// stored before the schema refused it): nothing is read or written.
		r.fail(&b, cachev1beta1.BackupInvalidPathReason, perr)
	} else {
		result, err = r.reconcileBackup(ctx, before, &b)
	}
	if perr := r.patchStatus(ctx, before, &b); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	if err != nil {
		log.Error(err, "Backup step failed", "backup", b.Name)
	}
	return result, nil
}

// initStatus sets what every pass starts from: the path and both
// conditions (Unknown until known). It returns ErrInvalidPath's error
// (and clears status.path) when a part of the path could reach outside
// <prefix>/<namespace>/<cluster>/<backup> (CheckBackupPath).
func (r *Reconciler) initStatus(b *cachev1beta1.RedisClusterBackup) error {
	b.Status.ObservedGeneration = b.Generation
	if b.Status.Phase == "" {
		b.Status.Phase = cachev1beta1.BackupPending
	}
	for _, t := range []string{cachev1beta1.BackupCompleteCondition, cachev1beta1.BackupObjectStoreReadyCondition} {
		if meta.FindStatusCondition(b.Status.Conditions, t) == nil {
			r.setCondition(b, t, metav1.ConditionUnknown, "NotObservedYet", "Not observed yet")
		}
	}
	path, err := ExpectedPath(b)
	b.Status.Path = path
	return err
}

// reconcileBackup moves b on; stored is b as read, what the API server
// holds until attempt writes the attempt's start.
func (r *Reconciler) reconcileBackup(ctx context.Context, stored, b *cachev1beta1.RedisClusterBackup) (ctrl.Result, error) {
	store, reason, err := OpenStoreVault(ctx, r.APIReader, r.Endpoints, r.Vault, b.Namespace, b.Spec.ClusterName, &b.Spec.ObjectStore)
	if err == nil {
		err = store.Check(ctx)
		reason = Reason(err)
	}
	if err != nil {
		r.setCondition(b, cachev1beta1.BackupObjectStoreReadyCondition, metav1.ConditionFalse, reason, err.Error())
		if errors.Is(err, ErrEndpointNotAllowed) {
			// The spec is immutable: only a new backup (or new operator
			// flags and a new backup) can change this.
			r.fail(b, cachev1beta1.BackupEndpointNotAllowedReason, err)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: retryPending}, nil
	}
	r.setCondition(b, cachev1beta1.BackupObjectStoreReadyCondition, metav1.ConditionTrue,
		cachev1beta1.BackupObjectStoreReachableReason, "Bucket "+b.Spec.ObjectStore.Bucket+" answered")

	// An attempt that wrote its manifest but died before its status write
	// is complete: the manifest is written only after every RDB. Only a
	// manifest this backup wrote counts: one of another namespace, cluster
	// or RedisClusterBackup (a re-created one of the same name) is refused.
	m, err := ReadManifest(ctx, store, b.Status.Path)
	if err == nil {
		_, want, _ := BackupIdentity(b) // the path was checked by initStatus
		err = CheckManifest(m, ManifestKey(b.Status.Path), want)
	}
	switch {
	case err == nil:
		r.complete(b, m)
		return ctrl.Result{}, nil
	case errors.Is(err, ErrManifestMismatch):
		r.fail(b, cachev1beta1.BackupManifestMismatchReason, err)
		return ctrl.Result{}, nil
	case !errors.Is(err, ErrNoSuchKey):
		return ctrl.Result{RequeueAfter: retryPending}, err
	}

	if b.Status.Phase == cachev1beta1.BackupRunning {
		// The operator stopped in the middle of an attempt: what it wrote
		// has no manifest, so the backup starts again from the beginning.
		r.Recorder.Eventf(b, "Warning", "AttemptInterrupted", "Attempt %d was cut short; its objects have no manifest", b.Status.Attempts)
	}
	if b.Status.Attempts >= r.MaxAttempts {
		r.fail(b, cachev1beta1.BackupFailedReason, fmt.Errorf("%d attempts made, none completed", b.Status.Attempts))
		return ctrl.Result{}, nil
	}

	var rc cachev1beta1.RedisCluster
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, &rc); err != nil {
		if apierrors.IsNotFound(err) {
			r.waiting(b, "RedisCluster "+b.Spec.ClusterName+" does not exist")
			return ctrl.Result{RequeueAfter: retryPending}, nil
		}
		return ctrl.Result{}, err
	}
	sources, warnings, why, err := r.sources(ctx, &rc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why != "" {
		r.waiting(b, why)
		return ctrl.Result{RequeueAfter: retryPending}, nil
	}
	password, err := clusterPassword(ctx, r.APIReader, &rc)
	if err != nil {
		r.waiting(b, err.Error())
		return ctrl.Result{RequeueAfter: retryPending}, nil
	}
	return r.attempt(ctx, stored, b, &rc, store, sources, warnings, password)
}

// attempt records the attempt's start (so that a restart sees it), then
// streams every shard and writes the manifest. The start is written as a
// patch from stored (what the API server holds), so that it carries the
// whole status this pass computed (path and conditions included): the
// patch's response replaces b.
func (r *Reconciler) attempt(ctx context.Context, stored, b *cachev1beta1.RedisClusterBackup, rc *cachev1beta1.RedisCluster, store *Store,
	sources []Source, warnings []string, password string) (ctrl.Result, error) {
	now := metav1.NewTime(r.Clock.Now())
	b.Status.Attempts++
	b.Status.Phase = cachev1beta1.BackupRunning
	b.Status.StartTime = &now
	b.Status.Shards, b.Status.Size, b.Status.RedisVersion = nil, 0, ""
	b.Status.Progress, b.Status.ProgressTime = nil, nil
	r.setCondition(b, cachev1beta1.BackupCompleteCondition, metav1.ConditionFalse, cachev1beta1.BackupRunningReason,
		fmt.Sprintf("Attempt %d: streaming %d shards", b.Status.Attempts, len(sources)))
	if err := r.patchStatus(ctx, stored, b); err != nil {
		return ctrl.Result{}, err
	}
	for _, w := range warnings {
		r.Recorder.Event(b, "Warning", "MasterSource", w)
	}
	r.Recorder.Eventf(b, "Normal", "Started", "Attempt %d: streaming %d shards to %s/%s", b.Status.Attempts, len(sources),
		b.Spec.ObjectStore.Bucket, b.Status.Path)
	ctrl.LoggerFrom(ctx).Info("Streaming shards", "backup", b.Name, "attempt", b.Status.Attempts, "shards", len(sources))

	actx, cancel := context.WithTimeout(ctx, r.AttemptTimeout)
	defer cancel()
	err := store.AbortIncomplete(actx, b.Status.Path+"/")
	var shards []ManifestShard
	var version string
	if err == nil {
		progress := NewProgress(len(sources))
		stop := r.reportProgress(actx, b, sources, progress)
		shards, version, err = Take(actx, store, b.Status.Path, sources, password, r.IdleTimeout, progress)
		stop()
		// The progress writes moved the API server's status on: the final
		// patch starts from there (so that it clears status.progress).
		*stored = *b.DeepCopy()
	}
	var m *Manifest
	if err == nil {
		m = &Manifest{Format: ManifestFormat, Namespace: b.Namespace, Cluster: b.Spec.ClusterName, Backup: b.Name,
			ClusterUID: string(rc.UID), BackupUID: string(b.UID),
			StartTime: now.UTC(), EndTime: r.Clock.Now().UTC(), RedisVersion: version, Shards: shards}
		err = WriteManifest(actx, store, b.Status.Path, m)
	}
	if err != nil {
		if b.Status.Attempts >= r.MaxAttempts {
			r.fail(b, cachev1beta1.BackupFailedReason, err)
			return ctrl.Result{}, nil
		}
		r.Recorder.Eventf(b, "Warning", "AttemptFailed", "Attempt %d failed: %v", b.Status.Attempts, err)
		// No attempt runs until the next pass starts one: Running would
		// make that pass report this attempt as interrupted.
		b.Status.Phase = cachev1beta1.BackupPending
		r.setCondition(b, cachev1beta1.BackupCompleteCondition, metav1.ConditionFalse, cachev1beta1.BackupRunningReason,
			fmt.Sprintf("Attempt %d failed, retrying: %v", b.Status.Attempts, err))
		return ctrl.Result{RequeueAfter: retryPending}, nil
	}
	r.complete(b, m)
	return ctrl.Result{}, nil
}

func (r *Reconciler) complete(b *cachev1beta1.RedisClusterBackup, m *Manifest) {
	end := metav1.NewTime(m.EndTime)
	start := metav1.NewTime(m.StartTime)
	b.Status.Phase = cachev1beta1.BackupCompleted
	b.Status.StartTime, b.Status.EndTime = &start, &end
	b.Status.RedisVersion = m.RedisVersion
	b.Status.Shards, b.Status.Size = nil, 0
	b.Status.Progress, b.Status.ProgressTime = nil, nil
	for _, s := range m.Shards {
		b.Status.Shards = append(b.Status.Shards, cachev1beta1.BackupShardStatus{Name: s.Name, Pod: s.Pod, NodeID: s.NodeID,
			Role: s.Role, Slots: s.Slots, ObjectKey: s.ObjectKey, Size: s.Size, SHA256: s.SHA256})
		b.Status.Size += s.Size
	}
	msg := fmt.Sprintf("%d shards, %d bytes, manifest %s", len(m.Shards), b.Status.Size, ManifestKey(b.Status.Path))
	r.setCondition(b, cachev1beta1.BackupCompleteCondition, metav1.ConditionTrue, cachev1beta1.BackupCompletedReason, msg)
	r.Recorder.Event(b, "Normal", "Completed", msg)
}

// fail ends b as Failed, the Complete condition False with reason and err.
func (r *Reconciler) fail(b *cachev1beta1.RedisClusterBackup, reason string, err error) {
	now := metav1.NewTime(r.Clock.Now())
	b.Status.Phase = cachev1beta1.BackupFailed
	b.Status.EndTime = &now
	r.setCondition(b, cachev1beta1.BackupCompleteCondition, metav1.ConditionFalse, reason, err.Error())
	r.Recorder.Eventf(b, "Warning", "Failed", "Backup failed: %v", err)
}

func (r *Reconciler) waiting(b *cachev1beta1.RedisClusterBackup, why string) {
	r.setCondition(b, cachev1beta1.BackupCompleteCondition, metav1.ConditionFalse, cachev1beta1.BackupWaitingForClusterReason, why)
}

func (r *Reconciler) setCondition(b *cachev1beta1.RedisClusterBackup, t string, s metav1.ConditionStatus, reason, msg string) {
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now())})
}

// patchStatus writes b's status when it differs from before's, as a
// merge patch (no conflict with a concurrent metadata edit).
func (r *Reconciler) patchStatus(ctx context.Context, before, b *cachev1beta1.RedisClusterBackup) error {
	if equalStatus(&before.Status, &b.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, b, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("writing the status of RedisClusterBackup %s: %w", b.Name, err)
	}
	return nil
}
