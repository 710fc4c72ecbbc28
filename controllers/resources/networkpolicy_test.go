package resources

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// peer is a pod as a NetworkPolicy sees it.
type peer struct {
	namespace string
	labels    map[string]string
}

func matches(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(l))
}

// admits reports whether np lets a TCP connection from src reach port of a
// pod np selects, with the semantics of networking.k8s.io/v1: a peer with
// only a podSelector means pods of the policy's namespace; a
// namespaceSelector is matched against the namespace's
// kubernetes.io/metadata.name label (the only namespace label here).
func admits(t *testing.T, np *networkingv1.NetworkPolicy, src peer, port int32) bool {
	t.Helper()
	for _, rule := range np.Spec.Ingress {
		portOK := false
		for _, p := range rule.Ports {
			if p.Port != nil && p.Port.IntVal == port && p.Protocol != nil && *p.Protocol == "TCP" {
				portOK = true
			}
		}
		for _, from := range rule.From {
			nsOK := src.namespace == np.Namespace
			if from.NamespaceSelector != nil {
				nsOK = matches(t, from.NamespaceSelector, map[string]string{NamespaceNameLabel: src.namespace})
			}
			podOK := from.PodSelector == nil || matches(t, from.PodSelector, src.labels)
			if portOK && from.IPBlock == nil && nsOK && podOK {
				return true
			}
		}
	}
	return false
}

func TestNetworkPolicy(t *testing.T) {
	const ns, opNS = "apps", "redis-operator-system"
	base := func(mutate func(*cachev1beta1.RedisCluster)) *cachev1beta1.RedisCluster {
		rc := &cachev1beta1.RedisCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: ns, UID: "uid-1"},
			Spec: cachev1beta1.RedisClusterSpec{
				Shards: 3, ReplicasPerShard: 1,
				NetworkPolicy: &cachev1beta1.NetworkPolicySpec{Enabled: true},
			},
		}
		if mutate != nil {
			mutate(rc)
		}
		return rc
	}
	web := map[string]string{"app": "web"}
	prometheus := map[string]string{"app.kubernetes.io/name": "prometheus"}
	monitoringPeer := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: "monitoring"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: prometheus},
	}
	operator := peer{opNS, OperatorPodLabels()}
	ownPod := peer{ns, ShardLabels("cache", 1)}
	otherCluster := peer{ns, ShardLabels("other", 0)}
	sameNameElsewhere := peer{"elsewhere", ShardLabels("cache", 0)}
	labelledClient := peer{ns, map[string]string{"app": "web", LabelClient: "true"}}
	labelledClientElsewhere := peer{"elsewhere", map[string]string{"app": "web", LabelClient: "true"}}
	webPod := peer{ns, web}
	operatorLookalike := peer{ns, OperatorPodLabels()}
	prom := peer{"monitoring", prometheus}
	promElsewhere := peer{"default", prometheus}

	type access struct {
		name string
		src  peer
		port int32
		want bool
	}
	cases := []struct {
		name   string
		mutate func(*cachev1beta1.RedisCluster)
		checks []access
	}{
		{
			name: "defaults: labelled clients of the namespace, the operator, the cluster itself",
			checks: []access{
				{"operator to the client port", operator, RedisPort, true},
				{"operator to the bus", operator, BusPort, false},
				{"operator's labels in the cluster's namespace", operatorLookalike, RedisPort, false},
				{"own pod to the client port (replication, MIGRATE)", ownPod, RedisPort, true},
				{"own pod to the bus", ownPod, BusPort, true},
				{"another cluster's pod to the bus", otherCluster, BusPort, false},
				{"another cluster's pod to the client port", otherCluster, RedisPort, false},
				{"a same-named cluster's pod in another namespace to the bus", sameNameElsewhere, BusPort, false},
				{"labelled client", labelledClient, RedisPort, true},
				{"labelled client to the bus", labelledClient, BusPort, false},
				{"labelled client in another namespace", labelledClientElsewhere, RedisPort, false},
				{"unlabelled pod", webPod, RedisPort, false},
				{"an unlisted port", ownPod, 6380, false},
			},
		},
		{
			name: "clients replace the default",
			mutate: func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.NetworkPolicy.Clients = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: web}}}
			},
			checks: []access{
				{"selected client", webPod, RedisPort, true},
				{"selected client to the bus", webPod, BusPort, false},
				{"pod with the default label only", peer{ns, map[string]string{LabelClient: "true"}}, RedisPort, false},
				{"operator still", operator, RedisPort, true},
				{"own pod still", ownPod, RedisPort, true},
			},
		},
		{
			name: "exporter open to monitoring only",
			mutate: func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Exporter.Enabled = true
				rc.Spec.NetworkPolicy.Monitoring = []networkingv1.NetworkPolicyPeer{monitoringPeer}
			},
			checks: []access{
				{"prometheus to the exporter", prom, ExporterPort, true},
				{"prometheus to the client port", prom, RedisPort, false},
				{"prometheus of another namespace", promElsewhere, ExporterPort, false},
				{"labelled client to the exporter", labelledClient, ExporterPort, false},
				{"own pod to the exporter", ownPod, ExporterPort, false},
			},
		},
		{
			name: "exporter closed without monitoring",
			mutate: func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Exporter.Enabled = true
			},
			checks: []access{
				{"prometheus to the exporter", prom, ExporterPort, false},
				{"own pod to the exporter", ownPod, ExporterPort, false},
			},
		},
		{
			name: "exporter disabled: no exporter rule",
			mutate: func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.NetworkPolicy.Monitoring = []networkingv1.NetworkPolicyPeer{monitoringPeer}
			},
			checks: []access{
				{"prometheus to the exporter port", prom, ExporterPort, false},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := base(tc.mutate)
			np := NetworkPolicy(rc, opNS)
			if np.Name != "cache-redis" || np.Namespace != ns {
				t.Errorf("NetworkPolicy %s/%s, want %s/cache-redis", np.Namespace, np.Name, ns)
			}
			if len(np.OwnerReferences) != 1 || np.OwnerReferences[0].UID != rc.UID || !*np.OwnerReferences[0].Controller {
				t.Errorf("owner references %+v, want rc as controller", np.OwnerReferences)
			}
			if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
				t.Errorf("policyTypes %v, want [Ingress] (egress stays open)", np.Spec.PolicyTypes)
			}
			for _, p := range []peer{ownPod, {ns, ShardLabels("cache", 2)}} {
				if !matches(t, &np.Spec.PodSelector, p.labels) {
					t.Errorf("podSelector %v does not select the cluster's pod %v", np.Spec.PodSelector, p.labels)
				}
			}
			if matches(t, &np.Spec.PodSelector, otherCluster.labels) {
				t.Errorf("podSelector %v selects another cluster's pod", np.Spec.PodSelector)
			}
			for _, c := range tc.checks {
				if got := admits(t, np, c.src, c.port); got != c.want {
					t.Errorf("%s (port %d): admitted %v, want %v", c.name, c.port, got, c.want)
				}
			}
		})
	}
}

// TestNetworkPolicyDeterministic: the same input gives the same object and
// hash, and a change of the peers changes the hash (so the controller
// writes).
func TestNetworkPolicyDeterministic(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "apps"},
		Spec:       cachev1beta1.RedisClusterSpec{NetworkPolicy: &cachev1beta1.NetworkPolicySpec{Enabled: true}},
	}
	a, b := NetworkPolicy(rc, "ops"), NetworkPolicy(rc, "ops")
	if a.Annotations[AppliedHashAnnotation] != b.Annotations[AppliedHashAnnotation] {
		t.Fatalf("hashes differ for the same input: %s, %s", a.Annotations[AppliedHashAnnotation], b.Annotations[AppliedHashAnnotation])
	}
	rc.Spec.NetworkPolicy.Clients = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	c := NetworkPolicy(rc, "ops")
	if c.Annotations[AppliedHashAnnotation] == a.Annotations[AppliedHashAnnotation] {
		t.Error("changing clients kept the hash")
	}
	// The builder copies the peers: editing the built object leaves rc alone.
	c.Spec.Ingress[0].From[2].PodSelector.MatchLabels["app"] = "changed"
	if rc.Spec.NetworkPolicy.Clients[0].PodSelector.MatchLabels["app"] != "web" {
		t.Error("the built NetworkPolicy shares its peers with the RedisCluster")
	}
	if d := NetworkPolicy(rc, "other-ns"); d.Annotations[AppliedHashAnnotation] == c.Annotations[AppliedHashAnnotation] {
		t.Error("changing the operator's namespace kept the hash")
	}
}
