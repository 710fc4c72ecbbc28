package webhooks

import (
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// validateTLSUpdate refuses turning spec.tls.enabled on or off for an
// existing cluster: its pods restart one by one, and a node serving TLS on
// the bus (tls-cluster yes) and one that does not cannot talk to each other,
// so the cluster would split while the roll lasts. Switching live instead
// (Redis 7.0 takes tls-port, tls-cluster and port by CONFIG SET) does not
// help clients: 7.0 announces one client port to all of them, the TLS port
// with tls-cluster yes and the plain one without, so one kind of cluster
// client is redirected to a port it cannot speak (checked against
// redis-server 7.0.15; see the README's Known limitations).
func validateTLSUpdate(old, new *cachev1beta1.RedisClusterSpec, p *field.Path, r *result) {
	if old.TLSEnabled() != new.TLSEnabled() {
		r.add(field.Forbidden(p.Child("enabled"),
			"cannot change on an existing cluster: nodes with and without TLS on the cluster bus cannot talk to each other while the pods restart; create a new cluster with spec.tls and move the data"))
	}
}

// tlsAccessChecks: the user must be allowed to get the Secret
// spec.tls.secretName names, when it is new or changed, since the operator
// reads it and mounts it into the Redis pods, which then present its key
// as their own identity (another service's certificate would let Redis
// impersonate it).
func tlsAccessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	t := obj.Spec.TLS
	if !obj.Spec.TLSEnabled() || t.SecretName == "" {
		return nil
	}
	if old != nil && old.Spec.TLSEnabled() && old.Spec.TLS.SecretName == t.SecretName {
		return nil
	}
	return []accessCheck{{
		path:        field.NewPath("spec", "tls", "secretName"),
		consequence: "the operator would mount its certificate and key into the Redis pods, which would present them as their own",
		attrs: authorizationv1.ResourceAttributes{
			Namespace: obj.Namespace, Verb: "get", Resource: "secrets", Name: t.SecretName,
		},
	}}
}
