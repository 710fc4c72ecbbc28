package controllers

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestNodePlacement: the shard's node rule is required once as many nodes
// can run the pods as a shard has pods, its zone rule once their zones are
// as many; a node lost from the list keeps it required for nodesHold (no
// roll for a node replaced), then it is preferred again; nodes that cannot
// be listed leave both preferred; the nodes are read once per nodesTTL
// whatever the number of passes.
func TestNodePlacement(t *testing.T) {
	ctx := context.Background()
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: "zone-" + name}}}
	}
	lists := 0
	cl := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(node("a"), node("b")).Build(),
		interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists++
			return c.List(ctx, list, opts...)
		}})
	rc := func(replicas int32) *cachev1beta1.RedisCluster {
		return &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("c%d", replicas)},
			Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: replicas}}
	}
	var c nodeCache
	now := time.Now()
	if p := c.placement(ctx, cl, rc(1), now); !p.ShardNodesRequired || !p.ShardZonesRequired {
		t.Errorf("2 nodes in 2 zones, 2 pods per shard: %+v", p)
	}
	if p := c.placement(ctx, cl, rc(2), now.Add(time.Second)); p.ShardNodesRequired || p.ShardZonesRequired {
		t.Errorf("2 nodes in 2 zones, 3 pods per shard: %+v", p)
	}
	if lists != 1 {
		t.Errorf("%d node lists within %s, want 1", lists, nodesTTL)
	}

	if err := cl.Delete(ctx, node("b")); err != nil {
		t.Fatal(err)
	}
	if p := c.placement(ctx, cl, rc(1), now.Add(nodesTTL)); !p.ShardNodesRequired || !p.ShardZonesRequired {
		t.Errorf("a node gone for %s: %+v, want both still required", nodesTTL, p)
	}
	if p := c.placement(ctx, cl, rc(1), now.Add(nodesHold)); p.ShardNodesRequired || p.ShardZonesRequired {
		t.Errorf("a node gone for %s: %+v, want neither required", nodesHold, p)
	}
	if lists != 3 {
		t.Errorf("%d node lists, want 3", lists)
	}

	forbidden := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(node("a"), node("b")).Build(),
		interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("nodes is forbidden")
		}})
	var none nodeCache
	if p := none.placement(ctx, forbidden, rc(1), now); p != (resources.Placement{}) {
		t.Errorf("nodes not listable: %+v", p)
	}
}
