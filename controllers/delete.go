package controllers

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// deletionRetry is how soon deletion cleanup is tried again.
const deletionRetry = 2 * time.Second

// reconcileDelete runs while the RedisCluster is being deleted. No
// topology work runs any more (only this function is called). With
// spec.storage.deleteClaimPolicy Delete the cluster's StatefulSets and
// then its PVCs are deleted (PVC protection removes the claims once
// garbage collection has stopped their pods); with Retain they stay,
// with their data. Then the finalizer goes, and garbage collection
// deletes the owned children.
//
// Deletion never hangs: the annotation cache.redis.io/skip-cleanup=true
// removes the finalizer at once, and when cleanup keeps failing for
// DeletionTimeout after the deletion request the finalizer is removed
// anyway, with a Warning event naming what was left.
func (r *RedisClusterReconciler) reconcileDelete(ctx context.Context, rc *cachev1beta1.RedisCluster) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	r.metrics.forget(rc.Namespace, rc.Name)
	r.Redis.Forget(client.ObjectKeyFromObject(rc).String())
	r.agreed.forget(client.ObjectKeyFromObject(rc))
	r.healthy.forget(client.ObjectKeyFromObject(rc))
	r.built.forget(client.ObjectKeyFromObject(rc))
	r.nodes.forget(client.ObjectKeyFromObject(rc))
	r.ooms.forget(client.ObjectKeyFromObject(rc))
	if !controllerutil.ContainsFinalizer(rc, cachev1beta1.Finalizer) {
		return ctrl.Result{}, nil
	}
	if rc.Annotations[cachev1beta1.SkipCleanupAnnotation] == "true" {
		log.Info("Skipping cleanup on request", "annotation", cachev1beta1.SkipCleanupAnnotation)
		r.Recorder.Eventf(rc, corev1.EventTypeNormal, "CleanupSkipped",
			"Annotation %s=true: PVCs are left as they are", cachev1beta1.SkipCleanupAnnotation)
		return ctrl.Result{}, r.updateFinalizer(ctx, rc, false)
	}

	err := r.cleanup(ctx, rc)
	remove, timedOut, retryAfter := deletionVerdict(r.Clock.Now(), rc.DeletionTimestamp.Time, r.DeletionTimeout, err)
	switch {
	case remove && !timedOut:
		log.Info("Cleanup done; removing finalizer", "deleteClaimPolicy", rc.Spec.Storage.DeleteClaimPolicy)
		return ctrl.Result{}, r.updateFinalizer(ctx, rc, false)
	case remove:
		log.Info("Cleanup did not finish in time; removing finalizer", "timeout", r.DeletionTimeout.String(), "error", err.Error())
		r.Recorder.Eventf(rc, corev1.EventTypeWarning, "CleanupTimedOut",
			"Cleanup did not finish within %s; removed the finalizer anyway: %v", r.DeletionTimeout, err)
		return ctrl.Result{}, r.updateFinalizer(ctx, rc, false)
	default:
		log.Info("Cleanup not done yet", "error", err.Error())
		return ctrl.Result{RequeueAfter: retryAfter}, nil
	}
}

// deletionVerdict decides, for a deletion requested at requested, whether
// the finalizer goes now: when cleanup succeeded, or (timedOut) when it
// still fails timeout after the request. Otherwise cleanup is retried
// after retryAfter, never past the deadline.
func deletionVerdict(now, requested time.Time, timeout time.Duration, cleanupErr error) (remove, timedOut bool, retryAfter time.Duration) {
	if cleanupErr == nil {
		return true, false, 0
	}
	deadline := requested.Add(timeout)
	if !now.Before(deadline) {
		return true, true, 0
	}
	return false, false, min(deletionRetry, deadline.Sub(now))
}

// cleanup does what deleteClaimPolicy asks and reports what is left: nil
// when every claim is gone or being deleted. The StatefulSets go first:
// while one exists it recreates a pod deleted meanwhile, and with it a
// claim no one would delete (the StatefulSet controller does nothing
// for a StatefulSet being deleted).
func (r *RedisClusterReconciler) cleanup(ctx context.Context, rc *cachev1beta1.RedisCluster) error {
	if rc.Spec.Storage.DeleteClaimPolicy != cachev1beta1.DeleteClaimDelete {
		return nil
	}
	var sets appsv1.StatefulSetList
	if err := r.Client.List(ctx, &sets, client.InNamespace(rc.Namespace), managedBy(rc)); err != nil {
		return fmt.Errorf("listing StatefulSets: %w", err)
	}
	for i := range sets.Items {
		sts := &sets.Items[i]
		if sts.DeletionTimestamp != nil || !metav1.IsControlledBy(sts, rc) {
			continue
		}
		if err := r.Client.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting StatefulSet %s: %w", sts.Name, err)
		}
	}
	if err := r.deleteClaims(ctx, rc, nil); err != nil {
		return err
	}
	var list corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &list, client.InNamespace(rc.Namespace), managedBy(rc)); err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	for _, pvc := range list.Items {
		if pvc.DeletionTimestamp == nil {
			return fmt.Errorf("claim %s is not deleted yet", pvc.Name)
		}
	}
	return nil
}
