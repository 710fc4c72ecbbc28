package controllers

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestComputeHealthReusesItsMemo: passes that see the same status and the
// same children reuse the last status.health instead of converting every
// child to unstructured again (an idle cluster's passes are mostly this),
// whatever order the shard StatefulSets come in and whatever order the
// claims and Services are listed in (the cache lists them in its map's
// order). The memo missed on most passes while its key listed the
// StatefulSets in map order, and again while it listed the claims and
// Services as they came.
func TestComputeHealthReusesItsMemo(t *testing.T) {
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 6}}
	labels := map[string]string{resources.LabelCluster: "c", resources.LabelManagedBy: resources.ManagedBy}
	var children []client.Object
	for i := range 6 {
		meta := metav1.ObjectMeta{Namespace: "ns", Name: "data-c-shard-" + strconv.Itoa(i) + "-0", Labels: labels}
		children = append(children, &corev1.PersistentVolumeClaim{ObjectMeta: meta})
	}
	for _, name := range []string{"c", "c-headless", "c-shard-0"} {
		children = append(children, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}})
	}
	lists := 0
	// Every other List comes back reversed, as a cache's map order would.
	reverse := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		lists++
		if lists%4 < 2 {
			return nil
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return err
		}
		slices.Reverse(items)
		return apimeta.SetList(list, items)
	}}
	r := &RedisClusterReconciler{Client: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(children...).WithInterceptorFuncs(reverse).Build()}
	s := newScope(rc, time.Now(), logr.Discard())
	s.statefulSets = map[int]*appsv1.StatefulSet{}
	for i := range 6 {
		name := "c-shard-" + strconv.Itoa(i)
		s.statefulSets[i] = &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: strconv.Itoa(10 + i)}}
	}
	first := r.computeHealth(ctx, s)
	key := client.ObjectKeyFromObject(rc)
	marker := cachev1beta1.HealthStatus{Status: cachev1beta1.HealthHealthy, Message: "from the memo"}
	r.healthy.put(key, r.healthy.last[key].in, marker)
	for pass := range 20 {
		if got := r.computeHealth(ctx, s); got != marker {
			t.Fatalf("pass %d with the same status and children computed %+v again (first pass: %+v), want the memo's", pass, got, first)
		}
	}
	s.statefulSets[2].ResourceVersion = "99"
	if got := r.computeHealth(ctx, s); got == marker {
		t.Fatal("a child's new resourceVersion still answered from the memo")
	}
}
