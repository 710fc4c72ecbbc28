package health

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// The built-in Argo CD health of the kinds the operator owns and Argo CD
// checks (gitops-engine pkg/health: health.go, health_statefulset.go,
// health_service.go, health_pvc.go, at the version go.mod names), restated
// so that the operator does not link gitops-engine (see the package
// documentation). TestChildHealthAsGitopsEngine holds each verdict and
// message equal to gitops-engine's.

// healthOrder is gitops-engine's order of health codes, best first; a code
// not in it counts as the best.
var healthOrder = []cachev1beta1.HealthCode{
	cachev1beta1.HealthHealthy,
	cachev1beta1.HealthSuspended,
	cachev1beta1.HealthProgressing,
	cachev1beta1.HealthMissing,
	cachev1beta1.HealthDegraded,
	cachev1beta1.HealthUnknown,
}

// isWorse reports whether next comes after current in healthOrder.
func isWorse(current, next cachev1beta1.HealthCode) bool {
	return max(slices.Index(healthOrder, next), 0) > max(slices.Index(healthOrder, current), 0)
}

// hookFinalizer is the finalizer Argo CD puts on its sync hooks; an object
// being deleted that carries it is checked as usual.
const hookFinalizer = "argocd.argoproj.io/hook-finalizer"

// childHealth is Argo CD's built-in health of obj, false for a kind without
// a built-in check among the operator's (apps/v1 StatefulSet, v1 Service,
// v1 PersistentVolumeClaim). An object being deleted is Progressing
// ("Pending deletion"); one that does not convert to its type is Unknown
// with the error.
func childHealth(obj *unstructured.Unstructured) (cachev1beta1.HealthStatus, bool) {
	gvk := obj.GroupVersionKind()
	var check func() (cachev1beta1.HealthStatus, error)
	switch {
	case gvk == appsv1.SchemeGroupVersion.WithKind("StatefulSet"):
		check = func() (cachev1beta1.HealthStatus, error) {
			var sts appsv1.StatefulSet
			err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &sts)
			return statefulSetHealth(&sts), err
		}
	case gvk == corev1.SchemeGroupVersion.WithKind("Service"):
		check = func() (cachev1beta1.HealthStatus, error) {
			var svc corev1.Service
			err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &svc)
			return serviceHealth(&svc), err
		}
	case gvk == corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"):
		check = func() (cachev1beta1.HealthStatus, error) {
			var pvc corev1.PersistentVolumeClaim
			err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &pvc)
			return claimHealth(&pvc), err
		}
	default:
		return cachev1beta1.HealthStatus{}, false
	}
	if obj.GetDeletionTimestamp() != nil && !slices.Contains(obj.GetFinalizers(), hookFinalizer) {
		return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthProgressing, Message: "Pending deletion"}, true
	}
	h, err := check()
	if err != nil {
		return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthUnknown,
			Message: fmt.Sprintf("failed to convert unstructured %s to typed: %v", gvk.Kind, err)}, true
	}
	return h, true
}

// statefulSetHealth: Progressing until the controller has observed the
// spec and every replica is ready; then, for the OnDelete strategy the
// operator uses, Healthy. For RollingUpdate a partition must be rolled
// out, and without one the current and update revisions must agree.
func statefulSetHealth(sts *appsv1.StatefulSet) cachev1beta1.HealthStatus {
	progressing := func(format string, args ...any) cachev1beta1.HealthStatus {
		return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthProgressing, Message: fmt.Sprintf(format, args...)}
	}
	healthy := func(format string, args ...any) cachev1beta1.HealthStatus {
		return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthHealthy, Message: fmt.Sprintf(format, args...)}
	}
	st := sts.Status
	if st.ObservedGeneration == 0 || sts.Generation > st.ObservedGeneration {
		return progressing("Waiting for statefulset spec update to be observed...")
	}
	if want := sts.Spec.Replicas; want != nil && st.ReadyReplicas < *want {
		return progressing("Waiting for %d pods to be ready...", *want-st.ReadyReplicas)
	}
	strategy := sts.Spec.UpdateStrategy
	switch {
	case strategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && strategy.RollingUpdate != nil:
		if sts.Spec.Replicas != nil && strategy.RollingUpdate.Partition != nil {
			if rolled := *sts.Spec.Replicas - *strategy.RollingUpdate.Partition; st.UpdatedReplicas < rolled {
				return progressing("Waiting for partitioned roll out to finish: %d out of %d new pods have been updated...",
					st.UpdatedReplicas, rolled)
			}
		}
		return healthy("partitioned roll out complete: %d new pods have been updated...", st.UpdatedReplicas)
	case strategy.Type == appsv1.OnDeleteStatefulSetStrategyType:
		return healthy("statefulset has %d ready pods", st.ReadyReplicas)
	case st.UpdateRevision != st.CurrentRevision:
		return progressing("waiting for statefulset rolling update to complete %d pods at revision %s...",
			st.UpdatedReplicas, st.UpdateRevision)
	}
	return healthy("statefulset rolling update complete %d pods at revision %s...", st.CurrentReplicas, st.CurrentRevision)
}

// serviceHealth: a LoadBalancer Service is Progressing until its load
// balancer has an ingress address; every other Service is Healthy.
func serviceHealth(svc *corev1.Service) cachev1beta1.HealthStatus {
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) == 0 {
		return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthProgressing}
	}
	return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthHealthy}
}

// claimHealth: Bound is Healthy, Pending Progressing, Lost Degraded, and
// a claim without a phase Unknown.
func claimHealth(pvc *corev1.PersistentVolumeClaim) cachev1beta1.HealthStatus {
	switch pvc.Status.Phase {
	case corev1.ClaimBound:
		return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthHealthy}
	case corev1.ClaimPending:
		return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthProgressing}
	case corev1.ClaimLost:
		return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthDegraded}
	}
	return cachev1beta1.HealthStatus{Status: cachev1beta1.HealthUnknown}
}
