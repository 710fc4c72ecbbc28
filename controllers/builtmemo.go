package controllers

import (
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// builtStatefulSets remembers, per cluster, the StatefulSets the builder
// made from one resourceVersion of the RedisCluster and one
// resources.Placement. resources.StatefulSet is a pure function of the
// RedisCluster (its metadata and spec, never its status) and the placement;
// every change of the former gives a new resourceVersion and a shard's
// build is kept with its placement, so an
// idle cluster's passes reuse one build per shard instead of encoding each
// pod template to JSON three times (TemplateHash for the template, the
// applied hash of the whole StatefulSet, TemplateHash again for the pods).
// Safe for concurrent use; the zero value is empty.
type builtStatefulSets struct {
	mu   sync.Mutex
	last map[client.ObjectKey]builtShards
}

type builtShards struct {
	resourceVersion string
	shards          map[int]builtShard
}

type builtShard struct {
	placement resources.Placement
	sts       *appsv1.StatefulSet
}

// get returns a copy of resources.StatefulSet(rc, shard, p), built once per
// resourceVersion of rc and placement (each call when rc has none, as an
// object never written has).
func (m *builtStatefulSets) get(rc *cachev1beta1.RedisCluster, shard int, p resources.Placement) *appsv1.StatefulSet {
	if rc.ResourceVersion == "" {
		return resources.StatefulSet(rc, shard, p)
	}
	key := client.ObjectKeyFromObject(rc)
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.last[key]
	if !ok || b.resourceVersion != rc.ResourceVersion {
		b = builtShards{resourceVersion: rc.ResourceVersion, shards: map[int]builtShard{}}
		if m.last == nil {
			m.last = map[client.ObjectKey]builtShards{}
		}
		m.last[key] = b
	}
	built, ok := b.shards[shard]
	if !ok || built.placement != p {
		built = builtShard{placement: p, sts: resources.StatefulSet(rc, shard, p)}
		b.shards[shard] = built
	}
	return built.sts.DeepCopy()
}

// templateHash is resources.TemplateHash(rc, shard, p), read from the
// remembered build.
func (m *builtStatefulSets) templateHash(rc *cachev1beta1.RedisCluster, shard int, p resources.Placement) string {
	if rc.ResourceVersion == "" {
		return resources.TemplateHash(rc, shard, p)
	}
	key := client.ObjectKeyFromObject(rc)
	m.mu.Lock()
	if b, ok := m.last[key]; ok && b.resourceVersion == rc.ResourceVersion {
		if built, ok := b.shards[shard]; ok && built.placement == p {
			h := built.sts.Spec.Template.Annotations[resources.TemplateHashAnnotation]
			m.mu.Unlock()
			return h
		}
	}
	m.mu.Unlock()
	return m.get(rc, shard, p).Spec.Template.Annotations[resources.TemplateHashAnnotation]
}

func (m *builtStatefulSets) forget(key client.ObjectKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, key)
}
