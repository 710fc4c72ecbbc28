package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/health"
)

// computeHealth is status.health: the health package's verdict on the
// status this pass computed, folded with Argo CD's built-in health of the
// cluster's StatefulSets, PVCs and Services (health.ForRedisCluster).
// Children that cannot be listed are left out; the verdict then rests on
// the conditions alone.
//
// The verdict is a function of the RedisCluster's generation, spec.paused
// and status (status.health aside) and of the children's contents: when
// none of them changed (the same status, every child at the same
// resourceVersion) the last verdict is returned without converting them
// again (healthMemos).
func (r *RedisClusterReconciler) computeHealth(ctx context.Context, s *scope) cachev1beta1.HealthStatus {
	type child struct {
		gvk schema.GroupVersionKind
		obj client.Object
	}
	var objs []child
	// In shard order: the memo's key lists the children, and a map's order
	// changes from one pass to the next.
	for _, i := range slices.Sorted(maps.Keys(s.statefulSets)) {
		if sts := s.statefulSets[i]; sts != nil {
			objs = append(objs, child{appsv1.SchemeGroupVersion.WithKind("StatefulSet"), sts})
		}
	}
	// The claims and Services are only read: listed without the cache's
	// deep copy, and sorted by name, since the cache lists them in its
	// map's order, which changes from one pass to the next.
	sel := client.MatchingLabels{resources.LabelCluster: s.rc.Name, resources.LabelManagedBy: resources.ManagedBy}
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &pvcs, client.InNamespace(s.rc.Namespace), sel, client.UnsafeDisableDeepCopy); err == nil {
		slices.SortFunc(pvcs.Items, func(a, b corev1.PersistentVolumeClaim) int { return strings.Compare(a.Name, b.Name) })
		for i := range pvcs.Items {
			objs = append(objs, child{corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), &pvcs.Items[i]})
		}
	}
	var svcs corev1.ServiceList
	if err := r.Client.List(ctx, &svcs, client.InNamespace(s.rc.Namespace), sel, client.UnsafeDisableDeepCopy); err == nil {
		slices.SortFunc(svcs.Items, func(a, b corev1.Service) int { return strings.Compare(a.Name, b.Name) })
		for i := range svcs.Items {
			objs = append(objs, child{corev1.SchemeGroupVersion.WithKind("Service"), &svcs.Items[i]})
		}
	}
	var versions strings.Builder
	for _, c := range objs {
		fmt.Fprintf(&versions, "%s/%s@%s;", c.gvk.Kind, c.obj.GetName(), c.obj.GetResourceVersion())
	}
	in := healthInput{generation: s.rc.Generation, paused: s.rc.Spec.Paused, status: *s.rc.Status.DeepCopy(), children: versions.String()}
	in.status.Health = nil
	key := client.ObjectKeyFromObject(s.rc)
	if h, ok := r.healthy.get(key, &in); ok {
		return h
	}
	var children []*unstructured.Unstructured
	for _, c := range objs {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c.obj)
		if err != nil {
			continue
		}
		obj := &unstructured.Unstructured{Object: u}
		obj.SetGroupVersionKind(c.gvk)
		children = append(children, obj)
	}
	h := health.ForRedisCluster(s.rc, children)
	r.healthy.put(key, in, h)
	return h
}

// healthInput is what status.health is computed from.
type healthInput struct {
	generation int64
	paused     bool
	status     cachev1beta1.RedisClusterStatus // without Health
	children   string                          // kind/name@resourceVersion of each child
}

// healthMemos holds, per cluster, the last status.health and its input.
// Safe for concurrent use; the zero value is empty.
type healthMemos struct {
	mu   sync.Mutex
	last map[client.ObjectKey]healthMemo
}

type healthMemo struct {
	in healthInput
	h  cachev1beta1.HealthStatus
}

func (m *healthMemos) get(key client.ObjectKey, in *healthInput) (cachev1beta1.HealthStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	last, ok := m.last[key]
	if !ok || last.in.generation != in.generation || last.in.paused != in.paused || last.in.children != in.children ||
		!equality.Semantic.DeepEqual(last.in.status, in.status) {
		return cachev1beta1.HealthStatus{}, false
	}
	return last.h, true
}

func (m *healthMemos) put(key client.ObjectKey, in healthInput, h cachev1beta1.HealthStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[client.ObjectKey]healthMemo{}
	}
	m.last[key] = healthMemo{in: in, h: h}
}

func (m *healthMemos) forget(key client.ObjectKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, key)
}
