package webhooks

import (
	"context"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

func withNetworkPolicy(clients []networkingv1.NetworkPolicyPeer, monitoring ...networkingv1.NetworkPolicyPeer) *cachev1beta1.RedisCluster {
	rc := validHub()
	rc.Spec.Exporter.Enabled = true
	rc.Spec.NetworkPolicy = &cachev1beta1.NetworkPolicySpec{Enabled: true, Clients: clients, Monitoring: monitoring}
	return rc
}

func pods(l map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: l} }

// TestNetworkPolicyPeersRejected: peers the API server would refuse in a
// NetworkPolicy are rejected at admission with their field path.
func TestNetworkPolicyPeersRejected(t *testing.T) {
	cases := []struct {
		name string
		rc   *cachev1beta1.RedisCluster
		want string
	}{
		{"empty client peer", withNetworkPolicy([]networkingv1.NetworkPolicyPeer{{}}),
			"spec.networkPolicy.clients[0]: Required value: a peer must set podSelector, namespaceSelector or ipBlock"},
		{"ipBlock with a podSelector", withNetworkPolicy([]networkingv1.NetworkPolicyPeer{{
			PodSelector: pods(map[string]string{"app": "web"}), IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"},
		}}), "spec.networkPolicy.clients[0].ipBlock: Forbidden: may not be combined with podSelector or namespaceSelector"},
		{"cidr not a CIDR", withNetworkPolicy([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0"}}}),
			`spec.networkPolicy.clients[0].ipBlock.cidr: Invalid value: "10.0.0.0": must be a CIDR with no address bits set past its prefix length, such as 10.0.0.0/16 or fd00::/64`},
		{"cidr with host bits", withNetworkPolicy([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.1/16"}}}),
			`spec.networkPolicy.clients[0].ipBlock.cidr: Invalid value: "10.0.0.1/16": must be a CIDR with no address bits set past its prefix length, such as 10.0.0.0/16 or fd00::/64`},
		{"except outside cidr", withNetworkPolicy([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.1.0.0/24"}}}}),
			`spec.networkPolicy.clients[0].ipBlock.except[0]: Invalid value: "10.1.0.0/24": must be a CIDR strictly inside cidr 10.0.0.0/16`},
		{"except equal to cidr", withNetworkPolicy([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.0.0/16"}}}}),
			`spec.networkPolicy.clients[0].ipBlock.except[0]: Invalid value: "10.0.0.0/16": must be a CIDR strictly inside cidr 10.0.0.0/16`},
		{"except of another family", withNetworkPolicy([]networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"fd00::/64"}}}}),
			`spec.networkPolicy.clients[0].ipBlock.except[0]: Invalid value: "fd00::/64": must be a CIDR strictly inside cidr 10.0.0.0/16`},
		{"malformed monitoring selector", withNetworkPolicy(nil, networkingv1.NetworkPolicyPeer{NamespaceSelector: pods(map[string]string{"bad key!": "x"})}),
			`spec.networkPolicy.monitoring[0].namespaceSelector.matchLabels: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		{"monitoring selector with a bad operator", withNetworkPolicy(nil, networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Like", Values: []string{"prom"}}},
		}}), `spec.networkPolicy.monitoring[0].podSelector.matchExpressions[0].operator: Invalid value: "Like": not a valid selector operator`},
	}
	v := &Validator{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.ValidateV1beta1(context.Background(), nil, tc.rc)
			if err == nil {
				t.Fatalf("accepted; want %s", tc.want)
			}
			if got := causes(t, err); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("causes:\n  %s\nwant exactly:\n  %s", strings.Join(got, "\n  "), tc.want)
			}
		})
	}
}

// TestNetworkPolicyAccepted: usual peers pass without warnings; monitoring
// with the exporter off passes with a warning.
func TestNetworkPolicyAccepted(t *testing.T) {
	v := &Validator{}
	rc := withNetworkPolicy(
		[]networkingv1.NetworkPolicyPeer{
			{PodSelector: pods(map[string]string{"app": "web"})},
			{NamespaceSelector: pods(map[string]string{"team": "payments"}), PodSelector: pods(map[string]string{"app": "api"})},
			{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.3.0/24"}}},
		})
	rc.Spec.NetworkPolicy.Monitoring = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: pods(map[string]string{"kubernetes.io/metadata.name": "monitoring"})}}
	warnings, err := v.ValidateV1beta1(context.Background(), nil, rc)
	if err != nil || len(warnings) > 0 {
		t.Fatalf("rejected or warned: %v %q", err, warnings)
	}
	if _, err := v.ValidateV1alpha1(context.Background(), nil, spokeOf(t, rc)); err != nil {
		t.Errorf("its v1alpha1 form: %v", err)
	}

	rc.Spec.Exporter.Enabled = false
	warnings, err = v.ValidateV1beta1(context.Background(), nil, rc)
	want := "spec.networkPolicy.monitoring: opens redis_exporter's port, but spec.exporter.enabled is false: no rule is rendered for it"
	if err != nil || len(warnings) != 1 || warnings[0] != want {
		t.Errorf("exporter off: err %v, warnings %q; want exactly %q", err, warnings, want)
	}
}
