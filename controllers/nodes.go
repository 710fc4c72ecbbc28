package controllers

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=list

const (
	// nodesTTL is how long one read of the nodes serves every cluster's
	// passes: one LIST per minute per operator, whatever the number of
	// clusters.
	nodesTTL = time.Minute
	// nodesHold is how long a cluster keeps its shard rule required after
	// the schedulable nodes were last seen to be enough: a node replaced
	// (its Node deleted, then registered again) or an autoscaler's brief
	// dip must not roll every pod twice.
	nodesHold = 10 * time.Minute
)

// nodeCache reads the nodes (uncached, at most once per nodesTTL; the
// operator does not watch nodes) and decides each cluster's
// resources.Placement from them. Until one read has succeeded (the
// operator may not list nodes, as in a namespaced install whose cluster
// role lacks it, or the API server failed) the placement is unknown, and
// placeShards keeps what each live StatefulSet has. Safe for concurrent
// use; the zero value is ready.
type nodeCache struct {
	mu     sync.Mutex
	readAt time.Time
	// reading is closed when the read in flight ends; nil when none is.
	reading chan struct{}
	nodes   []corev1.Node // name, labels and taints only
	listed  bool          // nodes holds one successful read
	// nodesAt and zonesAt are, per cluster, when its schedulable nodes and
	// their zones were last at least as many as a shard has pods.
	nodesAt, zonesAt map[client.ObjectKey]time.Time
}

// placement returns rc's placement at now: ShardNodesRequired while the
// nodes that can run its pods (resources.Schedulable) number at least
// 1 + spec.replicasPerShard, or did within nodesHold; ShardZonesRequired
// likewise for the zones of those nodes. known is false while no read of
// the nodes has succeeded. A pass that finds the first read in flight
// waits for it (or for ctx), so the passes of an operator that has just
// started all see the nodes.
func (c *nodeCache) placement(ctx context.Context, r client.Reader, rc *cachev1beta1.RedisCluster, now time.Time) (p resources.Placement, known bool) {
	c.mu.Lock()
	var done chan struct{}
	if now.Sub(c.readAt) >= nodesTTL && c.reading == nil {
		c.readAt = now // the others use what is there meanwhile
		done = make(chan struct{})
		c.reading = done
	}
	wait := c.reading
	listed := c.listed
	c.mu.Unlock()
	switch {
	case done != nil:
		nodes, err := listNodes(ctx, r)
		c.mu.Lock()
		if err == nil {
			c.nodes, c.listed = nodes, true
		}
		c.reading = nil
		c.mu.Unlock()
		close(done)
	case !listed && wait != nil:
		select {
		case <-wait:
		case <-ctx.Done():
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.listed {
		return resources.Placement{}, false
	}
	key := client.ObjectKeyFromObject(rc)
	pods := 1 + int(rc.Spec.ReplicasPerShard)
	nodes, zones := resources.Schedulable(rc, c.nodes)
	return resources.Placement{
		ShardNodesRequired: held(&c.nodesAt, key, nodes >= pods, now),
		ShardZonesRequired: held(&c.zonesAt, key, zones >= pods, now),
	}, true
}

// held records in (*at)[key] that enough holds at now, and reports whether
// it held within nodesHold.
func held(at *map[client.ObjectKey]time.Time, key client.ObjectKey, enough bool, now time.Time) bool {
	if enough {
		if *at == nil {
			*at = map[client.ObjectKey]time.Time{}
		}
		(*at)[key] = now
	}
	t, ok := (*at)[key]
	return ok && now.Sub(t) < nodesHold
}

func (c *nodeCache) forget(key client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.nodesAt, key)
	delete(c.zonesAt, key)
}

// nodesPage bounds one LIST of nodes: a Node with its status (images,
// conditions) is tens of KiB, so a large cluster is read in pages and only
// what resources.Schedulable reads is kept (name, labels, taints).
const nodesPage = 500

// listNodes reads every node, nodesPage at a time.
func listNodes(ctx context.Context, r client.Reader) ([]corev1.Node, error) {
	var out []corev1.Node
	cont := ""
	for {
		var list corev1.NodeList
		if err := r.List(ctx, &list, client.Limit(nodesPage), client.Continue(cont)); err != nil {
			return nil, err
		}
		for _, n := range list.Items {
			out = append(out, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels}, Spec: corev1.NodeSpec{Taints: n.Spec.Taints}})
		}
		if cont = list.Continue; cont == "" {
			return out, nil
		}
	}
}

// placeShards decides each shard's placement (s.placement) before the
// StatefulSets are applied, and gives each the exporter Secret's UID
// (s.exporterSecretUID) for the pod template. A rule the nodes allow (nodeCache.placement)
// is taken up by a shard whose StatefulSet is new or already requires it;
// a live shard that does not require it yet takes it up only when its
// pods already keep it (every pod scheduled, on distinct nodes, or in
// distinct zones), so that the roll to the new template never has to move
// a pod off its node or zone: a zonal or node-bound volume could not
// follow, and the pod would stay Pending. While the nodes were never read
// (nodeCache.placement not known) every live shard keeps the rules its
// StatefulSet has and a new one gets none required.
func (r *RedisClusterReconciler) placeShards(ctx context.Context, s *scope) error {
	allowed, known := r.nodes.placement(ctx, r.reader(), s.rc, s.now)
	s.placement = map[int]resources.Placement{}
	var byShard map[string][]corev1.Pod // listed once, only when needed
	for i := range int(s.rc.Spec.Shards) {
		s.placement[i] = allowed
	}
	for _, i := range s.leaving {
		s.placement[i] = allowed
	}
	for i, p := range s.placement {
		live := s.statefulSets[i]
		if live == nil {
			continue
		}
		have := resources.PlacementOf(live)
		if !known {
			// The nodes were never read: a live shard keeps its rules,
			// so an operator that cannot list nodes, or has not yet,
			// rolls nothing.
			s.placement[i] = have
			continue
		}
		if p == (resources.Placement{}) {
			continue
		}
		if (!p.ShardNodesRequired || have.ShardNodesRequired) && (!p.ShardZonesRequired || have.ShardZonesRequired) {
			continue
		}
		if byShard == nil {
			var pods corev1.PodList
			if err := r.Client.List(ctx, &pods, client.InNamespace(s.rc.Namespace), managedBy(s.rc)); err != nil {
				return fmt.Errorf("listing pods: %w", err)
			}
			byShard = map[string][]corev1.Pod{}
			for _, pod := range pods.Items {
				byShard[pod.Labels[resources.LabelShard]] = append(byShard[pod.Labels[resources.LabelShard]], pod)
			}
		}
		pods := byShard[strconv.Itoa(i)]
		all := len(pods) == 1+int(s.rc.Spec.ReplicasPerShard)
		nodesApart, zonesApart := all, all
		nodes, zones := map[string]bool{}, map[string]bool{}
		for _, pod := range pods {
			node := pod.Spec.NodeName
			zone := ""
			if node != "" {
				zone = r.zones.zoneOf(ctx, r.reader(), node, s.now)
			}
			nodesApart = nodesApart && node != "" && !nodes[node]
			zonesApart = zonesApart && zone != "" && !zones[zone]
			nodes[node], zones[zone] = true, true
		}
		p.ShardNodesRequired = p.ShardNodesRequired && (have.ShardNodesRequired || nodesApart)
		p.ShardZonesRequired = p.ShardZonesRequired && (have.ShardZonesRequired || zonesApart)
		s.placement[i] = p
	}
	for i, p := range s.placement {
		p.ExporterSecretUID = s.exporterSecretUID
		s.placement[i] = p
	}
	return nil
}
