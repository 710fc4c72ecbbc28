package webhooks

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// validateTLSUpdate refuses turning spec.tls.enabled on or off for an
// existing cluster: its pods restart one by one, and a node serving TLS on
// the bus (tls-cluster yes) and one that does not cannot talk to each other,
// so the cluster would split while the roll lasts.
func validateTLSUpdate(old, new *cachev1beta1.RedisClusterSpec, p *field.Path, r *result) {
	if old.TLSEnabled() != new.TLSEnabled() {
		r.add(field.Forbidden(p.Child("enabled"),
			"cannot change on an existing cluster: nodes with and without TLS on the cluster bus cannot talk to each other while the pods restart; create a new cluster with spec.tls and move the data"))
	}
}
