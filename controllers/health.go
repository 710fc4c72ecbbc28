package controllers

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/health"
)

// computeHealth is status.health: the health package's verdict on the
// status this pass computed, folded with the built-in gitops-engine health
// of the cluster's StatefulSets, PVCs and Services (health.ForRedisCluster).
// Children that cannot be listed are left out; the verdict then rests on
// the conditions alone.
func (r *RedisClusterReconciler) computeHealth(ctx context.Context, s *scope) cachev1beta1.HealthStatus {
	var children []*unstructured.Unstructured
	add := func(gvk schema.GroupVersionKind, obj runtime.Object) {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return
		}
		c := &unstructured.Unstructured{Object: u}
		c.SetGroupVersionKind(gvk)
		children = append(children, c)
	}
	for _, sts := range s.statefulSets {
		add(appsv1.SchemeGroupVersion.WithKind("StatefulSet"), sts)
	}
	sel := client.MatchingLabels{resources.LabelCluster: s.rc.Name, resources.LabelManagedBy: resources.ManagedBy}
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &pvcs, client.InNamespace(s.rc.Namespace), sel); err == nil {
		for i := range pvcs.Items {
			add(corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), &pvcs.Items[i])
		}
	}
	var svcs corev1.ServiceList
	if err := r.Client.List(ctx, &svcs, client.InNamespace(s.rc.Namespace), sel); err == nil {
		for i := range svcs.Items {
			add(corev1.SchemeGroupVersion.WithKind("Service"), &svcs.Items[i])
		}
	}
	return health.ForRedisCluster(s.rc, children)
}
