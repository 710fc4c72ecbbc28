package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// After a replica scale-down (2 replicas to 1), the removed replica's
// claim is deleted by the operator once its pod is gone and the engine
// converged, or settled (it waits only for pods that do not run); the
// claims of the pods that stay, of a StatefulSet scaled to fewer pods than
// spec (by hand), and of a leaving shard are kept.
func TestRemovedReplicaClaims(t *testing.T) {
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 2, ReplicasPerShard: 1}}
	var objs []client.Object
	pvc := func(shard, ord int) {
		objs = append(objs, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
			Name: resources.PVCName("c", shard, ord), Labels: resources.ShardLabels("c", shard)}})
	}
	for _, c := range [][2]int{{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {2, 0}, {2, 1}} {
		pvc(c[0], c[1])
	}
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	r := &RedisClusterReconciler{Client: cl, Recorder: record.NewFakeRecorder(10)}
	pass := func(res topology.Result) *scope {
		s := newScope(rc.DeepCopy(), time.Now(), logr.Discard())
		s.statefulSets = map[int]*appsv1.StatefulSet{
			0: {Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}},
			1: {Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0)}}, // scaled to 0 by hand
			2: {Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2)}}, // leaving
		}
		s.shards = []*shardPods{
			{Index: 0, Name: "c-shard-0", Desired: true, Pods: []podInfo{{Name: "c-shard-0-0", Ordinal: 0}, {Name: "c-shard-0-1", Ordinal: 1}}},
			{Index: 1, Name: "c-shard-1", Desired: true},
			{Index: 2, Name: "c-shard-2", Pods: []podInfo{{Name: "c-shard-2-0", Ordinal: 0}, {Name: "c-shard-2-1", Ordinal: 1}}},
		}
		s.result = &res
		return s
	}
	remaining := func() []string {
		var list corev1.PersistentVolumeClaimList
		if err := cl.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range list.Items {
			out = append(out, strings.TrimPrefix(p.Name, "data-c-shard-"))
		}
		slices.Sort(out)
		return out
	}
	all := []string{"0-0", "0-1", "0-2", "1-0", "1-1", "2-0", "2-1"}

	if _, _, err := r.removeReplicaClaims(ctx, pass(topology.Result{})); err != nil {
		t.Fatal(err)
	}
	if got := remaining(); !slices.Equal(got, all) {
		t.Errorf("claims deleted before the engine converged: %v left", got)
	}
	for _, res := range []topology.Result{{Converged: true}, {Settled: true, WaitingFor: []string{"c-shard-1-1"}}} {
		s := pass(res)
		if _, _, err := r.removeReplicaClaims(ctx, s); err != nil {
			t.Fatal(err)
		}
		if got, want := remaining(), slices.DeleteFunc(slices.Clone(all), func(n string) bool { return n == "0-2" }); !slices.Equal(got, want) {
			t.Errorf("%+v: claims left %v, want %v", res, got, want)
		}
		if len(s.events) != 1 || s.events[0].reason != "ClaimsDeleted" || !strings.Contains(s.events[0].message, "data-c-shard-0-2") {
			t.Errorf("%+v: events %+v", res, s.events)
		}
		if err := cl.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns",
			Name: resources.PVCName("c", 0, 2), Labels: resources.ShardLabels("c", 0)}}); err != nil {
			t.Fatal(err)
		}
	}
}
