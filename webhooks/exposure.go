package webhooks

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// slowlogExposes is why the slow log's keys need read access to the password.
const slowlogExposes = "the slow log keeps commands with their arguments (keys and values) for SLOWLOG GET, which the exporter's user may run"

// dataAccessChecks: what exposes an existing cluster's keys is reading
// them, which the cluster's password (its auth Secret) guards, so on an
// update the user must be allowed to get that Secret (and, with TLS, the
// TLS Secret whose private key the pods mount) to:
//   - run another image in the Redis pods (spec.image), or enable the
//     exporter or change its image: the new code runs with the keys (data),
//     the password (auth) and the private key (tls) mounted, and the
//     exporter's user reads SLOWLOG;
//   - turn authentication off (spec.auth.disabled), stop requiring client
//     certificates (spec.tls.authClients away from Required) or open the
//     plain-text port (spec.tls.plainPort): anyone who reaches the pods
//     could then read every key;
//   - add an ACL user or change a user's rules or password source
//     (spec.users), or move the cluster's password to another source
//     (spec.auth): whoever holds the password reads or writes the keys;
//   - put another certificate and CA in the pods (spec.tls.secretName):
//     they would trust the clients that CA signs;
//   - change what the slow log keeps or turn on keyspace notifications:
//     both show keys to others;
//   - turn off or change an enabled spec.networkPolicy: it keeps other
//     pods off the cluster bus, which takes no password.
//
// A new cluster holds nothing yet: its image and auth are the creator's
// (a restore and retained claims are checked on their own: checkRestore,
// checkClaims).
func dataAccessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	if old == nil {
		return nil
	}
	auth := resources.SecretName(obj.Name)
	// guardAuth: get the auth Secret, for what which its password guards.
	guardAuth := func(p *field.Path, what string) accessCheck {
		return secretCheck(obj.Namespace, auth, p, fmt.Sprintf("%s, which the cluster's password (Secret %s) guards", what, auth))
	}
	// guard: guardAuth, and with TLS the TLS Secret too.
	guard := func(p *field.Path, what string) []accessCheck {
		checks := []accessCheck{guardAuth(p, what)}
		if obj.Spec.TLSEnabled() {
			checks = append(checks, secretCheck(obj.Namespace, resources.TLSSecretName(obj), p,
				"it holds the Redis pods' private key, which guards the cluster's traffic and which the pods mount"))
		}
		return checks
	}
	var checks []accessCheck
	if old.Spec.Image != obj.Spec.Image {
		checks = append(checks, guard(field.NewPath("spec", "image"),
			fmt.Sprintf("image %q would run in the Redis pods with every key and the password of the cluster", obj.Spec.Image))...)
	}
	e, oe := obj.Spec.Exporter, old.Spec.Exporter
	if e.Enabled && (!oe.Enabled || oe.Image != e.Image) {
		checks = append(checks, guard(field.NewPath("spec", "exporter", "image"),
			fmt.Sprintf("image %q would run beside Redis in every pod with the exporter's password, whose SLOWLOG GET shows recent commands with their arguments", e.Image))...)
	}
	// In this order, so that the refusal names the same field each time
	// (a map's order changes from one request to the next).
	for _, c := range []struct{ key, what string }{
		{"slowlog-log-slower-than", slowlogExposes},
		{"slowlog-max-len", slowlogExposes},
		{"notify-keyspace-events", "keyspace notifications publish the name of every key written to whoever may subscribe, beyond their own key patterns"},
	} {
		if obj.Spec.Config[c.key] != old.Spec.Config[c.key] {
			checks = append(checks, secretCheck(obj.Namespace, auth, field.NewPath("spec", "config").Key(c.key),
				fmt.Sprintf("%s, and the cluster's password (Secret %s) guards those keys", c.what, auth)))
		}
	}
	if oa, na := authSource(old), authSource(obj); !apiequality.Semantic.DeepEqual(oa, na) {
		// Where the password comes from: a source the user reads would
		// become every client's password for the cluster's keys.
		checks = append(checks, guard(field.NewPath("spec", "auth"),
			"the cluster's password would be taken from the new source, so whoever reads it reads and writes every key")...)
	}
	if ot, nt := old.Spec.TLS, obj.Spec.TLS; ot != nil && nt != nil && ot.Enabled && nt.Enabled && ot.SecretName != nt.SecretName {
		// Another certificate and CA: the pods would trust the clients (and,
		// over a TLS bus, the nodes) its CA signs.
		checks = append(checks, guardAuth(field.NewPath("spec", "tls", "secretName"),
			"the Redis pods would trust the clients the new Secret's CA signs, for every key"),
			secretCheck(obj.Namespace, resources.TLSSecretName(old), field.NewPath("spec", "tls", "secretName"),
				"it holds the certificate and CA the cluster trusts now"))
	}
	if authDisabled(obj) && !authDisabled(old) {
		checks = append(checks, guardAuth(field.NewPath("spec", "auth", "disabled"), "anyone who reaches the Redis pods could read every key"))
	}
	if t, ot := obj.Spec.TLS, old.Spec.TLS; t != nil && ot != nil && t.Enabled && ot.Enabled {
		if ot.AuthClients == cachev1beta1.TLSAuthClientsRequired && t.AuthClients != cachev1beta1.TLSAuthClientsRequired {
			checks = append(checks, guard(field.NewPath("spec", "tls", "authClients"),
				"clients without a certificate of the cluster's CA would be let in to every key")...)
		}
		if t.PlainPort && !ot.PlainPort {
			checks = append(checks, guard(field.NewPath("spec", "tls", "plainPort"),
				"clients without TLS (and without a certificate) would be let in to every key")...)
		}
	}
	if np, onp := obj.Spec.NetworkPolicy, old.Spec.NetworkPolicy; onp != nil && onp.Enabled && !apiequality.Semantic.DeepEqual(onp, np) {
		checks = append(checks, secretCheck(obj.Namespace, auth, field.NewPath("spec", "networkPolicy"),
			fmt.Sprintf("the cluster's NetworkPolicy keeps every pod but its own off the cluster bus, which takes no password (any process reaching it can CLUSTER MEET into the cluster), and who reaches the pods at all; the cluster's password (Secret %s) guards the same keys", auth)))
	}
	if usersChanged(old.Spec.Users, obj.Spec.Users) {
		checks = append(checks, guardAuth(field.NewPath("spec", "users"), "a new ACL user, or new rules for one, reads or writes the keys its rules allow"))
	}
	return checks
}

// usersChanged reports whether users holds an entry old does not (by
// name), or one whose rules or password source changed (a source the
// user reads would give them that user's access). Removing users is no
// change here.
func usersChanged(old, users []cachev1beta1.UserSpec) bool {
	before := map[string]*cachev1beta1.UserSpec{}
	for i := range old {
		before[old[i].Name] = &old[i]
	}
	for _, u := range users {
		o, ok := before[u.Name]
		if !ok || o.Rules != u.Rules || !apiequality.Semantic.DeepEqual(o.PasswordFrom, u.PasswordFrom) {
			return true
		}
	}
	return false
}

// authSource is where rc's password is read: spec.auth's Secret and key,
// or the Vault secret (address, Vault namespace, mount, path, key,
// version); neither: generated by the operator. How a Vault login is made
// (role, account, audience, token, CA) is not part of it: those are
// checked on their own (vaultAccessChecks), and the same secret gives the
// same password whoever reads it.
func authSource(rc *cachev1beta1.RedisCluster) any {
	a := rc.Spec.Auth
	switch {
	case a == nil:
		return nil
	case a.SecretRef != nil:
		return *a.SecretRef
	case a.Vault != nil:
		v := a.Vault
		return [6]any{v.Address, v.Namespace, v.Mount, v.Path, v.Key, v.Version}
	}
	return nil
}

func authDisabled(rc *cachev1beta1.RedisCluster) bool {
	return rc.Spec.Auth != nil && rc.Spec.Auth.Disabled
}

// exposureAccessChecks: a client Service of type NodePort or LoadBalancer
// (spec.service.type) and the per-pod Services of spec.externalAccess
// make the operator create Services, reachable from outside the cluster
// but for per-pod ClusterIP ones: when the client Service becomes
// exposed, the per-pod Services appear or become exposed, the user must
// be allowed to create Services.
func exposureAccessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	var checks []accessCheck
	create := func(p *field.Path, what string) {
		checks = append(checks, accessCheck{path: p, consequence: "the operator would create " + what,
			attrs: authorizationv1.ResourceAttributes{Namespace: obj.Namespace, Verb: "create", Resource: "services"}})
	}
	if t := serviceType(obj); exposed(t) && (old == nil || serviceType(old) != t) {
		create(field.NewPath("spec", "service", "type"), fmt.Sprintf("the client Service as type %s, reachable from outside the cluster", t))
	}
	if obj.Spec.ExternalAccessEnabled() {
		t := obj.Spec.ExternalAccess.Type
		switch {
		case old == nil || !old.Spec.ExternalAccessEnabled():
			what := fmt.Sprintf("a Service of type %s for every Redis pod", t)
			if exposed(t) {
				what += ", reachable from outside the cluster"
			}
			create(field.NewPath("spec", "externalAccess", "enabled"), what)
		case exposed(t) && old.Spec.ExternalAccess.Type != t:
			create(field.NewPath("spec", "externalAccess", "type"), fmt.Sprintf("every Redis pod's Service as type %s, reachable from outside the cluster", t))
		}
	}
	return checks
}

func serviceType(rc *cachev1beta1.RedisCluster) corev1.ServiceType {
	if rc.Spec.Service == nil {
		return ""
	}
	return rc.Spec.Service.Type
}

func exposed(t corev1.ServiceType) bool {
	return t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer
}

// checkClaims asks, on create, for get on every claim a deleted
// RedisCluster of the same name left behind (deleteClaimPolicy Retain,
// the default; found by the cluster label its StatefulSets give them, or
// by the names they would claim, data-<name>-shard-...):
// the new cluster's pods would mount them and serve their keys, under the
// new spec's image and password. Without Claims nothing is checked.
func (v *Validator) checkClaims(ctx context.Context, old, obj *cachev1beta1.RedisCluster, r *result) error {
	if v.Claims == nil || v.Access == nil || old != nil {
		return nil
	}
	var claims corev1.PersistentVolumeClaimList
	if err := v.Claims.List(ctx, &claims, client.InNamespace(obj.Namespace)); apierrors.IsForbidden(err) {
		// A namespace the operator may not read (outside a namespaced
		// install's --watch-namespaces) is one it never reconciles either:
		// no claim there is ever mounted by its pods.
		return nil
	} else if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("listing the claims RedisCluster %s would take over: %w", obj.Name, err))
	}
	var checks []accessCheck
	for _, c := range claims.Items {
		if c.Labels[resources.LabelCluster] != obj.Name && !strings.HasPrefix(c.Name, resources.DataVolumeName+"-"+obj.Name+"-shard-") {
			continue
		}
		checks = append(checks, accessCheck{path: field.NewPath("metadata", "name"),
			consequence: "a RedisCluster of this name left it behind, and the new cluster's pods would mount it and serve its keys",
			attrs:       authorizationv1.ResourceAttributes{Namespace: obj.Namespace, Verb: "get", Resource: "persistentvolumeclaims", Name: c.Name}})
	}
	denied, err := reviewAccess(ctx, v.Access, checks)
	if err != nil {
		return err
	}
	r.add(denied...)
	return nil
}
