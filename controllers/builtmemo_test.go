package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestBuiltStatefulSetsFollowTheResourceVersion: the remembered build is
// the builder's output for the RedisCluster as it is at that
// resourceVersion, a caller's changes to its copy do not reach the next
// caller, and a new resourceVersion (a spec, label or annotation change)
// builds anew.
func TestBuiltStatefulSetsFollowTheResourceVersion(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u1", ResourceVersion: "7"},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1, Image: "redis:7.0"},
	}
	var m builtStatefulSets
	for shard := range 3 {
		got := m.get(rc, shard)
		if want := resources.StatefulSet(rc, shard); !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("shard %d: the remembered build differs from the builder's", shard)
		}
		if h, want := m.templateHash(rc, shard), resources.TemplateHash(rc, shard); h != want {
			t.Fatalf("shard %d: template hash %s, want %s", shard, h, want)
		}
		got.Spec.Replicas = nil
		got.Spec.Template.Annotations["mutated"] = "yes"
		if again := m.get(rc, shard); again.Spec.Replicas == nil || again.Spec.Template.Annotations["mutated"] != "" {
			t.Fatalf("shard %d: a caller's change to its copy reached the memo", shard)
		}
	}

	before := m.templateHash(rc, 0)
	changed := rc.DeepCopy()
	changed.Spec.Image = "redis:7.2"
	changed.ResourceVersion = "8"
	if h := m.templateHash(changed, 0); h == before || h != resources.TemplateHash(changed, 0) {
		t.Fatalf("a new resourceVersion with another image kept template hash %s", h)
	}
	if got := m.get(changed, 0); got.Spec.Template.Spec.Containers[0].Image != "redis:7.2" {
		t.Fatalf("a new resourceVersion built image %s", got.Spec.Template.Spec.Containers[0].Image)
	}
}
