package kustomize

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// endpoint is a pod as a NetworkPolicy sees it.
type endpoint struct {
	namespace       string
	namespaceLabels map[string]string
	labels          map[string]string
}

func selects(t *testing.T, sel *metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(labels.Set(l))
}

// allowed evaluates the ingress rules of policies (all in one namespace)
// for a TCP connection from src to port of dst, with the semantics of
// networking.k8s.io/v1: a pod no policy selects accepts everything; a
// selected pod accepts what any rule of any selecting policy allows; a
// peer with only a podSelector means pods of the policy's namespace.
func allowed(t *testing.T, policies []networkingv1.NetworkPolicy, src, dst endpoint, port int32) bool {
	t.Helper()
	isolated := false
	for _, p := range policies {
		if p.Namespace != dst.namespace || !selects(t, &p.Spec.PodSelector, dst.labels) {
			continue
		}
		isolated = true
		for _, rule := range p.Spec.Ingress {
			portOK := len(rule.Ports) == 0
			for _, rp := range rule.Ports {
				if rp.Port == nil || *rp.Port == intstr.FromInt32(port) {
					portOK = true
				}
			}
			peerOK := len(rule.From) == 0
			for _, peer := range rule.From {
				var nsOK bool
				if peer.NamespaceSelector != nil {
					nsOK = selects(t, peer.NamespaceSelector, src.namespaceLabels)
				} else {
					nsOK = src.namespace == p.Namespace
				}
				podOK := peer.PodSelector == nil || selects(t, peer.PodSelector, src.labels)
				if peer.IPBlock == nil && nsOK && podOK {
					peerOK = true
				}
			}
			if portOK && peerOK {
				return true
			}
		}
	}
	return !isolated
}

// TestNetworkPolicy checks who may reach what under the network-policy
// component, for Redis pods in the operator's namespace (where the
// component puts the Redis policy).
func TestNetworkPolicy(t *testing.T) {
	var policies []networkingv1.NetworkPolicy
	for _, o := range rendered(t, "prod") {
		if o.GetKind() == "NetworkPolicy" {
			policies = append(policies, *as[networkingv1.NetworkPolicy](t, o))
		}
	}
	ns := func(name string) map[string]string { return map[string]string{"kubernetes.io/metadata.name": name} }
	in := func(namespace string, l map[string]string) endpoint {
		return endpoint{namespace: namespace, namespaceLabels: ns(namespace), labels: l}
	}
	operator := in(namespace, map[string]string{"app.kubernetes.io/name": "redis-operator", "control-plane": "controller-manager"})
	redisA := in(namespace, map[string]string{"app.kubernetes.io/name": "redis", "cache.redis.io/cluster": "a"})
	redisB := in(namespace, map[string]string{"app.kubernetes.io/name": "redis", "cache.redis.io/cluster": "b"})
	client := in(namespace, map[string]string{"app": "web", "cache.redis.io/client": "true"})
	stranger := in(namespace, map[string]string{"app": "web"})
	clientElsewhere := in("other", map[string]string{"app": "web", "cache.redis.io/client": "true"})
	redisElsewhere := in("other", map[string]string{"app.kubernetes.io/name": "redis", "cache.redis.io/cluster": "a"})
	prometheus := in("monitoring", map[string]string{"app.kubernetes.io/name": "prometheus"})
	apiserver := endpoint{namespaceLabels: map[string]string{}}

	cases := []struct {
		name     string
		src, dst endpoint
		port     int32
		want     bool
	}{
		{"operator to redis", operator, redisA, 6379, true},
		{"labelled client to redis", client, redisA, 6379, true},
		{"replica to its master (replication, MIGRATE)", redisA, redisA, 6379, true},
		{"unlabelled pod to redis", stranger, redisA, 6379, false},
		{"labelled client in another namespace to redis", clientElsewhere, redisA, 6379, false},
		{"redis pod to another's bus", redisA, redisA, 16379, true},
		// The documented limitation: the bus is open between clusters of
		// one namespace.
		{"redis pod of another cluster to the bus", redisB, redisA, 16379, true},
		{"operator to the bus", operator, redisA, 16379, false},
		{"client to the bus", client, redisA, 16379, false},
		{"redis pod of another namespace to the bus", redisElsewhere, redisA, 16379, false},
		{"prometheus to redis_exporter", prometheus, redisA, 9121, true},
		{"prometheus to redis", prometheus, redisA, 6379, false},
		{"redis to an unlisted port", redisA, redisA, 6380, false},
		{"api server to the webhook", apiserver, operator, 9443, true},
		{"prometheus to the operator's metrics", prometheus, operator, 8080, true},
		{"redis to the operator's health port", redisA, operator, 8081, false},
	}
	for _, tc := range cases {
		if got := allowed(t, policies, tc.src, tc.dst, tc.port); got != tc.want {
			t.Errorf("%s (port %d): allowed %v, want %v", tc.name, tc.port, got, tc.want)
		}
	}
}
