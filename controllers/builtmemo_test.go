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
		got := m.get(rc, shard, resources.Placement{})
		if want := resources.StatefulSet(rc, shard, resources.Placement{}); !equality.Semantic.DeepEqual(got, want) {
			t.Fatalf("shard %d: the remembered build differs from the builder's", shard)
		}
		if h, want := m.templateHash(rc, shard, resources.Placement{}), resources.TemplateHash(rc, shard, resources.Placement{}); h != want {
			t.Fatalf("shard %d: template hash %s, want %s", shard, h, want)
		}
		got.Spec.Replicas = nil
		got.Spec.Template.Annotations["mutated"] = "yes"
		if again := m.get(rc, shard, resources.Placement{}); again.Spec.Replicas == nil || again.Spec.Template.Annotations["mutated"] != "" {
			t.Fatalf("shard %d: a caller's change to its copy reached the memo", shard)
		}
	}

	before := m.templateHash(rc, 0, resources.Placement{})
	changed := rc.DeepCopy()
	changed.Spec.Image = "redis:7.2"
	changed.ResourceVersion = "8"
	if h := m.templateHash(changed, 0, resources.Placement{}); h == before || h != resources.TemplateHash(changed, 0, resources.Placement{}) {
		t.Fatalf("a new resourceVersion with another image kept template hash %s", h)
	}
	if got := m.get(changed, 0, resources.Placement{}); got.Spec.Template.Spec.Containers[0].Image != "redis:7.2" {
		t.Fatalf("a new resourceVersion built image %s", got.Spec.Template.Spec.Containers[0].Image)
	}
}

// TestBuiltStatefulSetsFollowThePlacement: another placement at the same
// resourceVersion builds anew, with the placement's anti-affinity.
func TestBuiltStatefulSetsFollowThePlacement(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u1", ResourceVersion: "7"},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 1, ReplicasPerShard: 1, Image: "redis:7.0"},
	}
	var m builtStatefulSets
	required := resources.Placement{ShardNodesRequired: true}
	preferred := m.templateHash(rc, 0, resources.Placement{})
	if h := m.templateHash(rc, 0, required); h == preferred || h != resources.TemplateHash(rc, 0, required) {
		t.Fatalf("a required placement kept template hash %s", h)
	}
	if anti := m.get(rc, 0, required).Spec.Template.Spec.Affinity.PodAntiAffinity; len(anti.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Fatalf("a required placement built required terms %v", anti.RequiredDuringSchedulingIgnoredDuringExecution)
	}
}
