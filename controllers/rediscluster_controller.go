// Package controllers holds the RedisCluster reconciler: it keeps a
// RedisCluster's children (ConfigMap, Services, one StatefulSet and PDB per
// shard, the auth Secret) in shape, drives the Redis topology through the
// topology engine, rolls pods shard by shard, applies live config, and
// reports what it sees in status.
package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/status"
	"github.com/redis-operator/redis-operator/controllers/tlscerts"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// FieldOwner is the server-side apply field manager of everything the
// controller writes.
const FieldOwner = "redis-operator"

// Defaults of the reconciler's options.
const (
	DefaultResyncPeriod    = 30 * time.Second
	DefaultPassBudget      = 10 * time.Second
	DefaultRedisTimeout    = 5 * time.Second
	DefaultDeletionTimeout = 2 * time.Minute
	// DefaultRedisPoolSize bounds the Redis clients kept across passes: one
	// per node, about 12 KiB each (clientBufferSize buffers and go-redis's
	// own state), so 1024 cover 341 clusters of 3 nodes in about 12 MiB.
	DefaultRedisPoolSize = 1024

	// busyRequeue is how soon a pass looks again while something is
	// changing that no Kubernetes event announces (gossip, replica sync).
	busyRequeue = 5 * time.Second
	// stepRequeue follows a rolling-update step or a migration chunk.
	stepRequeue = time.Second
	// engineWaitBudget is how long one pass lets the engine wait in a row
	// for Redis to converge by itself before it reports and requeues.
	engineWaitBudget = 5 * time.Second
	// failoverTimeout bounds a planned failover (the replica catches up,
	// then wins an election); if it ends first, Redis finishes the
	// failover by itself and the next pass sees the outcome.
	failoverTimeout = 30 * time.Second
)

// The controller's RBAC, least privilege: it never deletes Services,
// ConfigMaps or Secrets (garbage collection does, through owner
// references) and only reads, deletes and watches pods and claims; it
// deletes a NetworkPolicy only when spec.networkPolicy is turned off.
//
// +kubebuilder:rbac:groups=cache.redis.io,resources=redisclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=cache.redis.io,resources=redisclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cache.redis.io,resources=redisclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=pods;persistentvolumeclaims,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// RedisClusterReconciler reconciles v1beta1 RedisClusters.
type RedisClusterReconciler struct {
	Client client.Client
	// APIReader reads from the API server, not the cache: the fresh
	// object a status write lost to a conflict is retried on, the Secrets
	// a spec references (getSecret) and a child's name missing from the
	// cache (getChild). Default: the manager's; Client when unset outside
	// a manager.
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  record.EventRecorder

	// ResyncPeriod is how often a settled cluster is observed again.
	ResyncPeriod time.Duration
	// PassBudget bounds one call of the engine's Reconcile, so a pass holds
	// its worker for about that long (plus the slot round in flight, which
	// is finished or rolled back, never left open); a longer migration
	// continues in the next pass from the slot states Redis holds, its
	// progress in status.migration.
	PassBudget time.Duration
	// RedisTimeout bounds dialing and every single Redis command.
	RedisTimeout time.Duration
	// BackupVault reads the access key pair of a restore's object store
	// when it is in Vault (credentialsVault), as the backup controllers do;
	// nil: such a restore waits, saying so in the operator's log.
	BackupVault *backup.VaultKeys
	// RestoreImage is the image of the init container that fetches a
	// restored shard's RDB (the operator's own); DefaultRestoreImage when empty.
	RestoreImage string
	// DeletionTimeout bounds cleanup on deletion; after it the finalizer
	// is removed anyway, with a Warning event.
	DeletionTimeout time.Duration
	// Clock is the source of time (tests inject one); default real time.
	Clock clock.PassiveClock
	// CAValidity is how long a CA the operator makes for a cluster's TLS
	// is valid (flag --tls-ca-validity); it is renewed with a third of that
	// left (renewCA). Default: tlscerts.DefaultCAValidity.
	CAValidity time.Duration
	// OperatorNamespace is the namespace of the operator's own pods, which
	// spec.networkPolicy lets reach the Redis pods. Default:
	// resources.DefaultOperatorNamespace.
	OperatorNamespace string
	// VaultAddresses is where spec.auth.vault.address may point (flags
	// --vault-address-allowlist and --vault-allow-insecure-http); the
	// zero value allows any https address. A refused address gives
	// CredentialsReady=False/InvalidSpec and no token leaves the operator.
	VaultAddresses credentials.AddressPolicy
	// WatchNamespaces are the namespaces whose RedisClusters and Secrets
	// the controller watches (flag --watch-namespaces); empty watches all.
	// The manager's cache must be restricted to the same namespaces
	// (CacheOptions).
	WatchNamespaces []string

	// Redis keeps the engine's Redis clients across passes (one per node,
	// at most DefaultRedisPoolSize unless set), so that a resync reuses
	// authenticated connections; a deleted cluster's are closed.
	Redis *topology.Pool

	// agreed remembers the children drifted found matching (drift.go);
	// healthy the last status.health computed (health.go); built the
	// shard StatefulSets of the cluster's last resourceVersion (builtmemo.go).
	agreed  agreement
	healthy healthMemos
	built   builtStatefulSets
	// written remembers the resourceVersion of the operator's last write
	// of each RedisCluster (freshread.go).
	written writtenVersions

	// creds remembers each cluster's last password-source read (auth.go).
	creds credentialCache
	// zones remembers the zones of the nodes pods run on (zones.go).
	zones zoneCache
	// nodes decides each cluster's placement from the nodes (nodes.go).
	nodes nodeCache
	// ooms remembers the OOM kills of redis containers already reported
	// (oomkills.go).
	ooms oomReports

	metrics *clusterMetrics
}

// SetupWithManager fills in defaults, registers the metrics and the field
// index, and starts watching RedisClusters, their children and their pods.
func (r *RedisClusterReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Scheme == nil {
		r.Scheme = mgr.GetScheme()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorderFor("redis-operator")
	}
	if r.ResyncPeriod <= 0 {
		r.ResyncPeriod = DefaultResyncPeriod
	}
	if r.PassBudget <= 0 {
		r.PassBudget = DefaultPassBudget
	}
	if r.RedisTimeout <= 0 {
		r.RedisTimeout = DefaultRedisTimeout
	}
	if r.DeletionTimeout <= 0 {
		r.DeletionTimeout = DefaultDeletionTimeout
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.CAValidity <= 0 {
		r.CAValidity = tlscerts.DefaultCAValidity
	}
	if r.OperatorNamespace == "" {
		r.OperatorNamespace = resources.DefaultOperatorNamespace
	}
	// The pool is not closed when the manager's context ends: that happens
	// while a cancelled pass still settles its slot round over these very
	// connections (the manager stops runnables and controllers together).
	// Whoever made it closes it after the manager has returned (main).
	if r.Redis == nil {
		r.Redis = topology.NewPool(DefaultRedisPoolSize)
	}
	r.metrics = registerMetrics()
	if err := mgr.GetFieldIndexer().IndexField(ctx, &cachev1beta1.RedisCluster{}, authSecretIndex, indexAuthSecret); err != nil {
		return fmt.Errorf("indexing RedisClusters by auth Secret: %w", err)
	}
	referencedSecrets, err := r.referencedSecretSource(mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// A spec change (generation) or an annotation (refresh, skip
		// cleanup); not the controller's own status writes, which would
		// start a pass per write, each racing the cache to a conflict.
		For(&cachev1beta1.RedisCluster{}, builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&appsv1.StatefulSet{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&networkingv1.NetworkPolicy{}).
		// Pods belong to the StatefulSets; map them back by label.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podToCluster),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetLabels()[resources.LabelManagedBy] == resources.ManagedBy
			}))).
		// A change of the Secret that spec.auth.secretRef names, seen
		// metadata-only (the Secret is not the operator's, so not in the
		// manager's cache; see referencedSecretSource).
		WatchesRawSource(referencedSecrets).
		WithOptions(opts).
		Complete(r)
}

// Reconcile is one pass: get the RedisCluster, handle deletion, ensure the
// finalizer, then run the phases of reconcileNormal and write the status
// (deferred, and only when it changed; see finishPass).
func (r *RedisClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	log := ctrl.LoggerFrom(ctx)
	// The manager cancels ctx when the operator stops: what that cut short
	// (a status write, a Redis call; the slot round in flight is settled
	// regardless) is no failure worth an error line per cluster, and the
	// next operator looks at every cluster anyway.
	defer func() {
		if retErr != nil && ctx.Err() != nil && errors.Is(retErr, ctx.Err()) {
			log.V(1).Info("Pass cut short: the operator is stopping", "error", retErr.Error())
			res, retErr = ctrl.Result{}, nil
		}
	}()
	rc := &cachev1beta1.RedisCluster{}
	if err := r.getCluster(ctx, req.NamespacedName, rc); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.forget(req.NamespacedName)
			r.metrics.forget(req.Namespace, req.Name)
			r.Redis.Forget(req.String())
			r.agreed.forget(req.NamespacedName)
			r.healthy.forget(req.NamespacedName)
			r.built.forget(req.NamespacedName)
			r.nodes.forget(req.NamespacedName)
			r.ooms.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !rc.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, rc)
	}
	if !controllerutil.ContainsFinalizer(rc, cachev1beta1.Finalizer) {
		log.Info("Adding finalizer")
		if err := r.updateFinalizer(ctx, rc, true); err != nil {
			return ctrl.Result{}, err
		}
	}

	s := newScope(rc, r.Clock.Now(), log)
	defer func() { res, retErr = r.finishPass(ctx, s, res, retErr) }()
	return r.reconcileNormal(ctx, s)
}

// finishPass writes the status and settles what the pass returns. A write
// lost to a newer version of an object (a conflict: the cache was behind)
// is an ordinary race, not a failure: the pass is retried soon, without an
// error (so without controller-runtime's error log and stack trace) and
// without a ReconcileError in status. An error always comes with a zero
// result.
func (r *RedisClusterReconciler) finishPass(ctx context.Context, s *scope, res ctrl.Result, passErr error) (ctrl.Result, error) {
	if apierrors.IsConflict(passErr) {
		s.log.V(1).Info("An object changed under the pass; retrying", "error", passErr.Error())
		if errors.Is(s.obs.ReconcileErr, passErr) {
			s.obs.ReconcileErr = nil
		}
		passErr, res = nil, ctrl.Result{RequeueAfter: stepRequeue}
	}
	err := r.updateStatus(ctx, s, passErr)
	if apierrors.IsConflict(err) {
		s.log.V(1).Info("The status changed under the pass; retrying", "error", err.Error())
		err, res = nil, ctrl.Result{RequeueAfter: stepRequeue}
	}
	switch {
	case passErr != nil && err != nil:
		return ctrl.Result{}, kerrors.NewAggregate([]error{passErr, err})
	case passErr != nil:
		return ctrl.Result{}, passErr
	case err != nil:
		return ctrl.Result{}, err
	}
	return res, nil
}

// phase is one step of reconcileNormal. It returns when to look again
// (zero: no opinion) and stops the pass when stop is true.
type phase func(ctx context.Context, s *scope) (res ctrl.Result, stop bool, err error)

// reconcileNormal runs the phases in order, keeping the soonest requeue;
// an error ends the pass (the status still records what was learned).
func (r *RedisClusterReconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	result := ctrl.Result{RequeueAfter: resyncAfter(r.ResyncPeriod)}
	for _, p := range []phase{
		r.validateSpec,
		r.reconcileRestore,
		r.prepareUsers,
		r.reconcileCredentials,
		r.reconcileTLS,
		r.reconcileChildren,
		r.reconcileExternalAccess,
		r.reconcileVolumeExpansion,
		r.observePods,
		r.reconcileTLSReload,
		r.reconcileTopology,
		r.removeLeftShards,
		r.reconcileRollout,
		r.reconcileReplicaScaleDown,
		r.removeReplicaClaims,
		r.reconcileLiveConfig,
		r.reconcileAnnounce,
		r.reconcileRotation,
		r.reconcileUsers,
	} {
		res, stop, err := p(ctx, s)
		if res.RequeueAfter > 0 && res.RequeueAfter < result.RequeueAfter {
			result.RequeueAfter = res.RequeueAfter
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		if stop {
			break
		}
	}
	if s.busy() && result.RequeueAfter > busyRequeue {
		result.RequeueAfter = busyRequeue
	}
	return result, nil
}

// resyncJitter spreads the resyncs of a settled cluster over ±10% of the
// period (the mean stays the period): clusters created together would
// otherwise come due together, every period, and queue for the workers in
// one burst, delaying the passes of a cluster that has work to do.
const resyncJitter = 0.1

// resyncAfter is when a settled cluster is observed again: period, jittered
// by resyncJitter.
func resyncAfter(period time.Duration) time.Duration {
	return wait.Jitter(time.Duration(float64(period)*(1-resyncJitter)), 2*resyncJitter/(1-resyncJitter))
}

// validateSpec stops the pass for a spec that can never be reconciled (the
// webhook rejects it at admission; this covers clusters without it).
func (r *RedisClusterReconciler) validateSpec(_ context.Context, s *scope) (ctrl.Result, bool, error) {
	if err := resources.ValidateConfig(s.rc.Spec.Config); err != nil {
		s.obs.SpecErr = err
		return ctrl.Result{}, true, reconcile.TerminalError(err)
	}
	return ctrl.Result{}, false, nil
}

// updateFinalizer adds or removes the finalizer with a JSON merge patch
// of metadata.finalizers alone, guarded by the resourceVersion and retried
// with a fresh read on conflict. Never an Update of the whole object: the
// Go types serialise unset struct fields as empty objects (spec.pod: {}),
// which would make the operator a manager of spec fields and bump
// metadata.generation, drift that Argo CD shows.
func (r *RedisClusterReconciler) updateFinalizer(ctx context.Context, rc *cachev1beta1.RedisCluster, add bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest := &cachev1beta1.RedisCluster{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(rc), latest); err != nil {
			return err
		}
		base := latest.DeepCopy()
		changed := false
		if add {
			changed = controllerutil.AddFinalizer(latest, cachev1beta1.Finalizer)
		} else {
			changed = controllerutil.RemoveFinalizer(latest, cachev1beta1.Finalizer)
		}
		if !changed {
			latest.DeepCopyInto(rc)
			return nil
		}
		patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
		if err := r.Client.Patch(ctx, latest, patch, client.FieldOwner(FieldOwner)); err != nil {
			return err
		}
		r.written.remember(latest)
		latest.DeepCopyInto(rc)
		return nil
	})
}

// updateStatus computes the status from the pass's observation, emits
// events for transitions, updates the metrics, and writes the status
// subresource only when it changed (a merge patch guarded by the
// resourceVersion; transition events follow only a write that succeeded,
// the events of the pass's actions are recorded in any case).
func (r *RedisClusterReconciler) updateStatus(ctx context.Context, s *scope, passErr error) error {
	return r.writeStatus(ctx, s, passErr, true)
}

// writeStatus is updateStatus; final is false for an interim write in the
// middle of a pass (announceWork), which leaves observedGeneration alone:
// the pass has not succeeded yet.
func (r *RedisClusterReconciler) writeStatus(ctx context.Context, s *scope, passErr error, final bool) error {
	succeeded := passErr == nil && final
	if passErr != nil && s.obs.SpecErr == nil && s.obs.ReconcileErr == nil {
		s.obs.ReconcileErr = passErr
	}
	err := r.patchStatus(ctx, s, succeeded)
	// The patch carries the resourceVersion it is based on: a pass that
	// worked from a stale cached object conflicts instead of writing. When
	// only the object's metadata moved on (a finalizer, a label), the
	// status is computed again on the object read fresh from the API
	// server and written at once, a few times at most. When its status
	// moved on, another pass wrote what this one never saw (a rotation
	// step, say): this pass's conclusions rest on a stale status, so it
	// writes nothing and the conflict requeues a fresh pass (finishPass).
	// A newer generation is left to its own pass, as are the transition
	// events a failed write leaves unrecorded.
	for attempt := 0; apierrors.IsConflict(err) && attempt < statusWriteAttempts; attempt++ {
		latest := &cachev1beta1.RedisCluster{}
		if gerr := r.reader().Get(ctx, client.ObjectKeyFromObject(s.rc), latest); gerr != nil {
			break
		}
		if latest.Generation != s.rc.Generation || !latest.DeletionTimestamp.IsZero() ||
			!equality.Semantic.DeepEqual(latest.Status, s.original.Status) {
			break
		}
		// The stored status is the one this pass began with: what the pass
		// set in s.rc.Status (credentials, TLS serials, conditions) applies
		// to the fresh object as it is.
		computed := s.rc.Status.DeepCopy()
		s.original = latest.DeepCopy()
		s.rc = latest
		s.rc.Status = *computed
		err = r.patchStatus(ctx, s, succeeded)
	}
	if err != nil {
		// The actions happened whatever the status says; record them once.
		r.recordEvents(s, true)
		s.events = slices.DeleteFunc(s.events, func(e event) bool { return e.action })
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing status: %w", err)
	}
	r.emitTransitionEvents(s)
	return nil
}

// statusWriteAttempts bounds the immediate retries of a status write
// lost to a conflict.
const statusWriteAttempts = 3

// patchStatus computes the status of s.rc from the pass's observation
// (conditions against s.original's), and writes it when it differs from
// s.original's, as a merge patch guarded by s.original's resourceVersion.
func (r *RedisClusterReconciler) patchStatus(ctx context.Context, s *scope, succeeded bool) error {
	rc := s.rc
	s.obs.CertificatePending = ""
	if t := rc.Status.TLS; t != nil && t.Serial != "" && t.Serial != t.AppliedSerial {
		s.obs.CertificatePending = t.Serial
	}
	status.Apply(rc, &s.obs, s.now, succeeded)
	health := r.computeHealth(ctx, s)
	rc.Status.Health = &health
	r.metrics.observe(rc, s.obs.Topology)
	if equality.Semantic.DeepEqual(s.original.Status, rc.Status) {
		return nil
	}
	s.log.V(1).Info("Writing status", "phase", rc.Status.Phase)
	if err := r.Client.Status().Patch(ctx, rc, client.MergeFromWithOptions(s.original, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	r.written.remember(rc)
	return nil
}

func (r *RedisClusterReconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// engine returns a topology engine for s's cluster that authenticates
// with password (over TLS with spec.tls, see reconcileTLS), bounds every dial and command by RedisTimeout and keeps
// its clients in r.Redis.
func (r *RedisClusterReconciler) engine(s *scope, password string) *topology.Engine {
	opts := topology.Options{
		Pool:           r.Redis,
		PoolOwner:      client.ObjectKeyFromObject(s.rc).String(),
		Password:       password,
		DialTimeout:    r.RedisTimeout,
		CommandTimeout: r.RedisTimeout,
		// A pass that only waits for Redis returns soon, so status shows
		// what it waits for (a master unreachable, a failover to come).
		WaitBudget: engineWaitBudget,
		Logger:     s.log.WithName("topology"),
	}
	if r.metrics != nil {
		opts.OnCommand = r.metrics.countCommand
	}
	if s.tls != nil {
		opts.TLS, opts.TLSID = s.tls.config, s.tls.id
	}
	return topology.New(opts)
}

// isTransient reports engine errors that clear by themselves: nodes still
// starting, or a chunk of a long migration that used up the PassBudget.
func isTransient(err error) bool {
	return errors.Is(err, topology.ErrNotReady) || errors.Is(err, context.DeadlineExceeded)
}
