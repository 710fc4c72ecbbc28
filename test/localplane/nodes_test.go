package localplane_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/redis-operator/redis-operator/test/localplane"
)

// TestNodes: the default plane has three untainted nodes in three zones;
// kube-scheduler honours a required pod anti-affinity (one pod per node)
// and a cordon; a lost node goes NotReady and tainted unreachable with its
// pod's process gone, and once restored it is Ready, untainted, with its
// pod running again.
func TestNodes(t *testing.T) {
	p := startPlane(t, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := p.Client

	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var zones []string
	for _, n := range nodes.Items {
		zones = append(zones, n.Labels[corev1.LabelTopologyZone])
		if n.Labels[corev1.LabelHostname] != n.Name || len(n.Spec.Taints) > 0 {
			t.Errorf("node %s: hostname label %q, taints %v; want its name and none", n.Name, n.Labels[corev1.LabelHostname], n.Spec.Taints)
		}
	}
	slices.Sort(zones)
	if len(nodes.Items) != localplane.DefaultNodes || !slices.Equal(zones, localplane.Zones) || !slices.Equal(p.Nodes, []string{"localplane-1", "localplane-2", "localplane-3"}) {
		t.Fatalf("nodes %v in zones %v", p.Nodes, zones)
	}

	// Cordon the third node: the three pods, which repel each other per
	// node, can only take two; uncordoned, the third is scheduled there.
	cordon(ctx, t, p, p.Nodes[2], true)
	sts := redisStatefulSet()
	sts.Spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "redis"}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	if _, err := c.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-config"},
		Data:       map[string]string{"redis.conf": "port 6379\ndir /data\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().StatefulSets("default").Create(ctx, sts, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReadyPods(ctx, t, c, "default", 2, nil)
	time.Sleep(3 * time.Second) // the scheduler had every chance to place the third
	if ready := waitReadyPods(ctx, t, c, "default", 2, nil); slices.ContainsFunc(ready, func(pod corev1.Pod) bool { return pod.Spec.NodeName == p.Nodes[2] }) {
		t.Fatal("a pod was scheduled to the cordoned node")
	}
	cordon(ctx, t, p, p.Nodes[2], false)
	pods := waitReadyPods(ctx, t, c, "default", 3, nil)
	byNode := map[string]corev1.Pod{}
	for _, pod := range pods {
		byNode[pod.Spec.NodeName] = pod
	}
	if len(byNode) != 3 {
		t.Fatalf("pods not one per node: %v", byNode)
	}

	// Lose the second node.
	lost := byNode[p.Nodes[1]]
	if err := p.LoseNode(p.Nodes[1]); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, lost.Status.PodIP)
	poll(ctx, t, "node NotReady and tainted unreachable", func() (bool, string) {
		n, err := c.CoreV1().Nodes().Get(ctx, p.Nodes[1], metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nodeReady(n) == corev1.ConditionUnknown && hasTaint(n, corev1.TaintNodeUnreachable), string(nodeReady(n))
	})
	pod, err := c.CoreV1().Pods("default").Get(ctx, lost.Name, metav1.GetOptions{})
	if err != nil || pod.Spec.NodeName != p.Nodes[1] || conditionStatus(pod, corev1.PodReady) == corev1.ConditionTrue {
		t.Errorf("pod %s of the lost node: %v, node %q, ready %q; want it still bound there and not ready", lost.Name, err, pod.Spec.NodeName, conditionStatus(pod, corev1.PodReady))
	}

	if err := p.RestoreNode(p.Nodes[1]); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "node Ready and untainted", func() (bool, string) {
		n, err := c.CoreV1().Nodes().Get(ctx, p.Nodes[1], metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return nodeReady(n) == corev1.ConditionTrue && !hasTaint(n, corev1.TaintNodeUnreachable), string(nodeReady(n))
	})
	waitReadyPods(ctx, t, c, "default", 3, nil)
}

func cordon(ctx context.Context, t *testing.T, p *localplane.Plane, name string, on bool) {
	t.Helper()
	// A merge patch, as kubectl cordon sends: the node controller and the
	// node's heartbeat write the Node too, so a read-modify-Update can
	// lose to a conflict.
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
	if _, err := p.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func nodeReady(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}
