package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	appsv1 "k8s.io/api/apps/v1"
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
	if p, _ := c.placement(ctx, cl, rc(1), now); !p.ShardNodesRequired || !p.ShardZonesRequired {
		t.Errorf("2 nodes in 2 zones, 2 pods per shard: %+v", p)
	}
	if p, _ := c.placement(ctx, cl, rc(2), now.Add(time.Second)); p.ShardNodesRequired || p.ShardZonesRequired {
		t.Errorf("2 nodes in 2 zones, 3 pods per shard: %+v", p)
	}
	if lists != 1 {
		t.Errorf("%d node lists within %s, want 1", lists, nodesTTL)
	}

	if err := cl.Delete(ctx, node("b")); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.placement(ctx, cl, rc(1), now.Add(nodesTTL)); !p.ShardNodesRequired || !p.ShardZonesRequired {
		t.Errorf("a node gone for %s: %+v, want both still required", nodesTTL, p)
	}
	if p, _ := c.placement(ctx, cl, rc(1), now.Add(nodesHold)); p.ShardNodesRequired || p.ShardZonesRequired {
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
	if p, known := none.placement(ctx, forbidden, rc(1), now); p != (resources.Placement{}) || known {
		t.Errorf("nodes not listable: %+v, known %v", p, known)
	}
}

// TestNodePlacementFirstRead: passes that come while the first read of the
// nodes is in flight (an operator just started, several workers) wait for
// it instead of taking the unknown placement.
func TestNodePlacementFirstRead(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	cl := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}).Build(),
		interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			<-release
			return c.List(ctx, list, opts...)
		}})
	var c nodeCache
	now := time.Now()
	type answer struct {
		p     resources.Placement
		known bool
	}
	answers := make(chan answer, 4)
	for i := range 4 {
		rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("c%d", i)},
			Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
		go func() {
			p, known := c.placement(ctx, cl, rc, now)
			answers <- answer{p, known}
		}()
	}
	time.Sleep(50 * time.Millisecond) // the four passes are in placement
	close(release)
	for range 4 {
		if a := <-answers; !a.known || !a.p.ShardNodesRequired {
			t.Errorf("a pass during the first read: %+v known %v, want the nodes' placement", a.p, a.known)
		}
	}
}

// TestPlaceShards: with nodes and zones enough for a shard's pods, a new
// shard requires both rules; a live shard without them takes up each rule
// only when its pods already keep it (here: on distinct nodes, but two in
// one zone), so the roll never has to move a pod; a live shard that
// already requires a rule keeps it.
func TestPlaceShards(t *testing.T) {
	ctx := context.Background()
	zones := map[string]string{"n1": "zone-a", "n2": "zone-b", "n3": "zone-c", "n4": "zone-a"}
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "u"},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	objs := []client.Object{}
	for n, z := range zones {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{corev1.LabelTopologyZone: z}}})
	}
	pod := func(shard int, ordinal int, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("c-shard-%d-%d", shard, ordinal),
			Labels: resources.ShardLabels("c", shard)}, Spec: corev1.PodSpec{NodeName: node}}
	}
	// Shard 0: apart by node and zone. Shard 1: apart by node, not zone.
	objs = append(objs, pod(0, 0, "n1"), pod(0, 1, "n2"), pod(1, 0, "n1"), pod(1, 1, "n4"))
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).Build()
	r := &RedisClusterReconciler{Client: cl, APIReader: cl}
	s := newScope(rc, time.Now(), testr.New(t))
	s.statefulSets = map[int]*appsv1.StatefulSet{
		0: resources.StatefulSet(rc, 0, resources.Placement{}),
		1: resources.StatefulSet(rc, 1, resources.Placement{}),
	}
	if err := r.placeShards(ctx, s); err != nil {
		t.Fatal(err)
	}
	both := resources.Placement{ShardNodesRequired: true, ShardZonesRequired: true}
	want := map[int]resources.Placement{0: both, 1: {ShardNodesRequired: true}, 2: both}
	if !maps.Equal(s.placement, want) {
		t.Fatalf("placement %v, want %v", s.placement, want)
	}

	// Shard 1 built with both rules keeps them although its pods share a zone.
	s.statefulSets[1] = resources.StatefulSet(rc, 1, both)
	if err := r.placeShards(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.placement[1] != both {
		t.Fatalf("a shard that requires both rules got %+v", s.placement[1])
	}

	// Nodes never read (not listable): live shards keep their rules, a new
	// one requires none.
	forbidden := interceptor.NewClient(cl, interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*corev1.NodeList); ok {
			return errors.New("nodes is forbidden")
		}
		return c.List(ctx, list, opts...)
	}})
	r = &RedisClusterReconciler{Client: forbidden, APIReader: forbidden}
	s.statefulSets[0] = resources.StatefulSet(rc, 0, resources.Placement{})
	if err := r.placeShards(ctx, s); err != nil {
		t.Fatal(err)
	}
	want = map[int]resources.Placement{0: {}, 1: both, 2: {}}
	if !maps.Equal(s.placement, want) {
		t.Fatalf("nodes never read: placement %v, want %v", s.placement, want)
	}
}

// TestListNodesPages: the nodes are read nodesPage at a time, following
// the continue token to the last page, and only name, labels and taints
// are kept.
func TestListNodesPages(t *testing.T) {
	var limits []int64
	pages := map[string]struct {
		names []string
		next  string
	}{"": {[]string{"a", "b"}, "p2"}, "p2": {[]string{"c"}, ""}}
	cl := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).Build(), interceptor.Funcs{
		List: func(_ context.Context, _ client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := (&client.ListOptions{}).ApplyOptions(opts)
			limits = append(limits, o.Limit)
			page := pages[o.Continue]
			nl := list.(*corev1.NodeList)
			for _, n := range page.names {
				nl.Items = append(nl.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"l": n},
					Annotations: map[string]string{"big": "status"}}, Status: corev1.NodeStatus{Phase: corev1.NodeRunning}})
			}
			nl.Continue = page.next
			return nil
		}})
	nodes, err := listNodes(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
		if n.Annotations != nil || n.Status.Phase != "" || n.Labels["l"] != n.Name {
			t.Errorf("node %s kept %+v", n.Name, n)
		}
	}
	if fmt.Sprint(names) != "[a b c]" || fmt.Sprint(limits) != fmt.Sprintf("[%d %d]", nodesPage, nodesPage) {
		t.Errorf("read %v with limits %v, want [a b c] in two pages of %d", names, limits, nodesPage)
	}
}
