package kustomize

import (
	"fmt"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

func networkPolicies(t *testing.T, objs []*unstructured.Unstructured) []networkingv1.NetworkPolicy {
	t.Helper()
	var policies []networkingv1.NetworkPolicy
	for _, o := range objs {
		if o.GetKind() == "NetworkPolicy" {
			policies = append(policies, *as[networkingv1.NetworkPolicy](t, o))
		}
	}
	return policies
}

// TestNetworkPolicy checks who may reach what under the network-policy
// component, for Redis pods in the operator's namespace (where the
// component puts the Redis policy).
func TestNetworkPolicy(t *testing.T) {
	policies := networkPolicies(t, rendered(t, "prod"))
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
	otherMonitoringPod := in("monitoring", map[string]string{"app.kubernetes.io/name": "grafana"})
	prometheusElsewhere := in("tenant", map[string]string{"app.kubernetes.io/name": "prometheus"})
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
		{"another pod of the monitoring namespace to redis_exporter", otherMonitoringPod, redisA, 9121, false},
		{"a prometheus of another namespace to redis_exporter", prometheusElsewhere, redisA, 9121, false},
		{"a prometheus of another namespace to the operator's metrics", prometheusElsewhere, operator, 8443, false},
		{"redis to an unlisted port", redisA, redisA, 6380, false},
		{"api server to the webhook", apiserver, operator, 9443, true},
		{"prometheus to the operator's metrics", prometheus, operator, 8443, true},
		{"redis to the operator's health port", redisA, operator, 8081, false},
		{"redis to the operator's metrics", redisA, operator, 8443, false},
	}
	for _, tc := range cases {
		if got := allowed(t, policies, tc.src, tc.dst, tc.port); got != tc.want {
			t.Errorf("%s (port %d): allowed %v, want %v", tc.name, tc.port, got, tc.want)
		}
	}
}

// TestNetworkPolicyMonitoringPatch: the patch the component's
// kustomization.yaml documents, applied in an overlay, moves both metrics
// rules to another monitoring namespace and selector.
func TestNetworkPolicyMonitoringPatch(t *testing.T) {
	doc, err := manifests.ReadFile("components/network-policy/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var patch []string
	in := false
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "#   patches:") {
			in = true
		}
		if in && !strings.HasPrefix(line, "#   ") {
			break
		}
		if in {
			patch = append(patch, strings.TrimPrefix(line, "#   "))
		}
	}
	if len(patch) < 3 {
		t.Fatalf("no documented patch in the component's kustomization.yaml:\n%s", doc)
	}
	mem := mustMemFS(t)
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: %s
resources: [../base]
components: [../components/network-policy]
%s
`, namespace, strings.Join(patch, "\n"))
	if err := mem.WriteFile("/test-monitoring-patch/kustomization.yaml", []byte(k)); err != nil {
		t.Fatal(err)
	}
	m, err := Build(mem, "/test-monitoring-patch")
	if err != nil {
		t.Fatal(err)
	}
	policies := networkPolicies(t, objectsOf(t, m))
	ep := func(ns string, l map[string]string) endpoint {
		return endpoint{namespace: ns, namespaceLabels: map[string]string{"kubernetes.io/metadata.name": ns}, labels: l}
	}
	operator := ep(namespace, map[string]string{"app.kubernetes.io/name": "redis-operator", "control-plane": "controller-manager"})
	redis := ep(namespace, map[string]string{"app.kubernetes.io/name": "redis", "cache.redis.io/cluster": "a"})
	moved := ep("observability", map[string]string{"app": "prometheus"})
	old := ep("monitoring", map[string]string{"app.kubernetes.io/name": "prometheus"})
	for _, tc := range []struct {
		name     string
		src, dst endpoint
		port     int32
		want     bool
	}{
		{"the named prometheus to redis_exporter", moved, redis, 9121, true},
		{"the named prometheus to the operator's metrics", moved, operator, 8443, true},
		{"the default prometheus to redis_exporter", old, redis, 9121, false},
		{"the default prometheus to the operator's metrics", old, operator, 8443, false},
		{"the named prometheus to redis", moved, redis, 6379, false},
		{"the operator to redis, untouched by the patch", operator, redis, 6379, true},
	} {
		if got := allowed(t, policies, tc.src, tc.dst, tc.port); got != tc.want {
			t.Errorf("%s (port %d): allowed %v, want %v", tc.name, tc.port, got, tc.want)
		}
	}
}
