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
// redis-server 7.0.15; see the docs' Known limitations). The message names
// the way that works, a second cluster (tlsBlueGreen).
func validateTLSUpdate(old, new *cachev1beta1.RedisClusterSpec, p *field.Path, r *result) {
	if old.TLSEnabled() != new.TLSEnabled() {
		r.add(field.Forbidden(p.Child("enabled"), "cannot change on an existing cluster: Redis 7.0 cannot run the cluster bus "+
			"with and without TLS at once, so the nodes would split while the pods restart; "+tlsBlueGreen))
	}
}

// tlsBlueGreen is the way to turn TLS on or off, which validateTLSUpdate
// names (docs/tls-and-users.md, "Turning TLS on or off").
const tlsBlueGreen = "use the blue/green path instead: create a new RedisCluster with the spec.tls you want, " +
	"restore it from a backup of this one (spec.bootstrap.fromBackup) or migrate the clients and their data to it, " +
	"then delete this one (docs: TLS, \"Turning TLS on or off\")"

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
