package webhooks

import (
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// validateNetworkPolicy checks spec.networkPolicy's peers against the
// rules the API server applies to a NetworkPolicy's peers (Kubernetes API
// reference, NetworkPolicyPeer and IPBlock), so a spec the operator could
// never apply is rejected at admission with its own field path. It warns
// when monitoring is set but the exporter it opens is disabled.
func validateNetworkPolicy(np *cachev1beta1.NetworkPolicySpec, exporterEnabled bool, p *field.Path, r *result) {
	for i := range np.Clients {
		validatePeer(&np.Clients[i], p.Child("clients").Index(i), r)
	}
	for i := range np.Monitoring {
		validatePeer(&np.Monitoring[i], p.Child("monitoring").Index(i), r)
	}
	if np.Enabled && len(np.Monitoring) > 0 && !exporterEnabled {
		r.warn(p.Child("monitoring"), "opens redis_exporter's port, but spec.exporter.enabled is false: no rule is rendered for it")
	}
}

func validatePeer(peer *networkingv1.NetworkPolicyPeer, p *field.Path, r *result) {
	opts := metav1validation.LabelSelectorValidationOptions{}
	if peer.PodSelector != nil {
		r.add(metav1validation.ValidateLabelSelector(peer.PodSelector, opts, p.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		r.add(metav1validation.ValidateLabelSelector(peer.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	}
	if peer.IPBlock == nil {
		if peer.PodSelector == nil && peer.NamespaceSelector == nil {
			r.add(field.Required(p, "a peer must set podSelector, namespaceSelector or ipBlock"))
		}
		return
	}
	if peer.PodSelector != nil || peer.NamespaceSelector != nil {
		r.add(field.Forbidden(p.Child("ipBlock"), "may not be combined with podSelector or namespaceSelector"))
	}
	validateIPBlock(peer.IPBlock, p.Child("ipBlock"), r)
}

// validateIPBlock: cidr is a CIDR in canonical form (the API server's
// strict CIDR validation rejects 10.0.0.1/16), and every except is a CIDR strictly
// inside it, of the same address family.
func validateIPBlock(b *networkingv1.IPBlock, p *field.Path, r *result) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil || cidr.Masked() != cidr {
		r.add(field.Invalid(p.Child("cidr"), b.CIDR, "must be a CIDR with no address bits set past its prefix length, such as 10.0.0.0/16 or fd00::/64"))
		return
	}
	for i, e := range b.Except {
		ep := p.Child("except").Index(i)
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			r.add(field.Invalid(ep, e, "must be a CIDR such as 10.0.1.0/24"))
			continue
		}
		if ex.Addr().Is4() != cidr.Addr().Is4() || ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()) {
			r.add(field.Invalid(ep, e, "must be a CIDR strictly inside cidr "+b.CIDR))
		}
	}
}
