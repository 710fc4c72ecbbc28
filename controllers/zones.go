package controllers

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get

// zoneTTL is how long a node's zone label, once read, is trusted: zones of
// nodes practically never change, and reading them on every pass would
// cost one GET per node per pass.
const zoneTTL = 10 * time.Minute

// zoneCache remembers the topology.kubernetes.io/zone label of the nodes
// the pods run on, read from the API server (metadata only, no informer:
// the operator does not watch nodes). A node it cannot read (gone, or the
// operator may not get nodes) has no zone, which only means the engine
// spreads masters over nodes, not zones.
type zoneCache struct {
	mu   sync.Mutex
	seen map[string]zoneEntry
}

type zoneEntry struct {
	zone string
	at   time.Time
}

// zoneOf returns node's zone label, "" when it has none or cannot be read.
func (z *zoneCache) zoneOf(ctx context.Context, r client.Reader, node string, now time.Time) string {
	z.mu.Lock()
	e, ok := z.seen[node]
	z.mu.Unlock()
	if ok && now.Sub(e.at) < zoneTTL {
		return e.zone
	}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	zone := ""
	if err := r.Get(ctx, client.ObjectKey{Name: node}, m); err == nil {
		zone = m.Labels[corev1.LabelTopologyZone]
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.seen == nil {
		z.seen = map[string]zoneEntry{}
	}
	z.seen[node] = zoneEntry{zone: zone, at: now}
	return zone
}

// placePods records the zone of every scheduled pod of s (podInfo.Zone),
// which the engine reads with the pod's node to spread masters
// (topology.Endpoint.Node and Zone).
func (r *RedisClusterReconciler) placePods(ctx context.Context, s *scope) {
	for _, sh := range s.shards {
		for i := range sh.Pods {
			if p := &sh.Pods[i]; p.Node != "" {
				p.Zone = r.zones.zoneOf(ctx, r.reader(), p.Node, s.now)
			}
		}
	}
}
