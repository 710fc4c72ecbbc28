package resources

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// LabelClient marks, with the value "true", the pods that may reach the
// client port of every RedisCluster of their namespace whose
// spec.networkPolicy names no clients (the same label the network-policy
// kustomize component uses).
const LabelClient = "cache.redis.io/client"

// NamespaceNameLabel is the label the API server sets on every namespace
// to its name (Kubernetes 1.22 and later, "Automatic labelling" in the
// namespaces documentation); a namespaceSelector on it selects one
// namespace by name.
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// DefaultOperatorNamespace is the namespace the kustomize install puts the
// operator in (kustomize/base/kustomization.yaml).
const DefaultOperatorNamespace = "redis-operator-system"

// OperatorPodLabels are the labels of the operator's own pods
// (kustomize/base/manager/manager.yaml), which must reach every Redis
// pod's client port.
func OperatorPodLabels() map[string]string {
	return map[string]string{
		LabelName:       "redis-operator",
		"control-plane": "controller-manager",
	}
}

// NetworkPolicyName is the name of the NetworkPolicy of spec.networkPolicy.
func NetworkPolicyName(rc string) string { return rc + "-redis" }

// NetworkPolicy builds the NetworkPolicy of spec.networkPolicy for the
// cluster's pods (ClusterSelector), with Ingress as its only policy type.
// It allows, over TCP:
//   - RedisPort (and PlainPort with spec.tls.plainPort) from the operator's pods (OperatorPodLabels in namespace
//     operatorNamespace), from the cluster's own pods (replication and
//     MIGRATE use the client port) and from spec.networkPolicy.clients, or
//     when that is empty from the pods of rc's namespace labelled
//     LabelClient=true;
//   - BusPort from the cluster's own pods only;
//   - ExporterPort from spec.networkPolicy.monitoring, when the exporter is
//     enabled and that list is not empty.
//
// Nothing else reaches the pods through this policy. operatorNamespace
// must be the operator's namespace: an empty one matches no namespace, so
// the operator could not reach Redis. rc.Spec.NetworkPolicy may be nil
// (then the lists are empty); whether to apply the object at all is the
// caller's decision.
func NetworkPolicy(rc *cachev1beta1.RedisCluster, operatorNamespace string) *networkingv1.NetworkPolicy {
	var spec cachev1beta1.NetworkPolicySpec
	if rc.Spec.NetworkPolicy != nil {
		spec = *rc.Spec.NetworkPolicy
	}
	own := networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: ClusterSelector(rc.Name)}}
	operator := networkingv1.NetworkPolicyPeer{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: operatorNamespace}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: OperatorPodLabels()},
	}
	clients := spec.Clients
	if len(clients) == 0 {
		clients = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelClient: "true"}}}}
	}
	clientPeers := append([]networkingv1.NetworkPolicyPeer{operator, own}, deepCopyPeers(clients)...)

	ingress := []networkingv1.NetworkPolicyIngressRule{
		{Ports: clientPorts(rc), From: clientPeers},
		{Ports: tcpPort(BusPort), From: []networkingv1.NetworkPolicyPeer{*own.DeepCopy()}},
	}
	if rc.Spec.Exporter.Enabled && len(spec.Monitoring) > 0 {
		ingress = append(ingress, networkingv1.NetworkPolicyIngressRule{Ports: tcpPort(ExporterPort), From: deepCopyPeers(spec.Monitoring)})
	}
	np := &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            NetworkPolicyName(rc.Name),
			Namespace:       rc.Namespace,
			Labels:          ClusterLabels(rc.Name),
			OwnerReferences: ownerRefs(rc),
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: ClusterSelector(rc.Name)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     ingress,
		},
	}
	SetAppliedHash(np)
	return np
}

func tcpPort(port int32) []networkingv1.NetworkPolicyPort {
	tcp := corev1.ProtocolTCP
	p := intstr.FromInt32(port)
	return []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}
}

func deepCopyPeers(peers []networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer {
	out := make([]networkingv1.NetworkPolicyPeer, len(peers))
	for i := range peers {
		peers[i].DeepCopyInto(&out[i])
	}
	return out
}
