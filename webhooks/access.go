package webhooks

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
)

// The webhook asks the API server whether the requesting user may read
// the Secrets and mint the tokens a spec makes the operator use.
//
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// AccessReviewer answers whether a user may do what attrs describe, as the
// API server's authorizer would.
type AccessReviewer interface {
	// Review returns whether user is allowed, the authorizer's reason (may
	// be empty), or an error when no answer could be had.
	Review(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (allowed bool, reason string, err error)
}

// SubjectAccessReviewer is an AccessReviewer asking the API server with a
// SubjectAccessReview (authorization.k8s.io/v1) through Client, which must
// be allowed to create subjectaccessreviews.
type SubjectAccessReviewer struct {
	Client client.Client
}

// Review implements AccessReviewer.
func (r SubjectAccessReviewer) Review(ctx context.Context, user authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes) (bool, string, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: &attrs,
		User:               user.Username,
		Groups:             user.Groups,
		UID:                user.UID,
		Extra:              extra,
	}}
	if err := r.Client.Create(ctx, sar); err != nil {
		return false, "", err
	}
	reason := sar.Status.Reason
	if sar.Status.EvaluationError != "" {
		reason = strings.TrimSpace(reason + " " + sar.Status.EvaluationError)
	}
	return sar.Status.Allowed, reason, nil
}

// accessCheck is one permission the requesting user must hold.
type accessCheck struct {
	path  *field.Path
	attrs authorizationv1.ResourceAttributes
	// consequence says what the operator does with the object, for the
	// message.
	consequence string
}

// accessChecks lists what the user writing obj (over old, nil on create)
// must be allowed to do, because the operator will do it on the spec's
// behalf with its own, wider rights:
//
//   - get each Secret spec.auth names (secretRef, vault.tokenSecretRef,
//     vault.caSecretRef): the operator reads it;
//   - create serviceaccounts/token for the service account the Vault login
//     uses (vault.serviceAccountName, or the RedisCluster's name when
//     empty): the operator mints a token of it and sends it to Vault.
//
// A reference is checked when it is new or changed; the token Secret and
// the service account also when vault.address changes (the token would go
// somewhere new), and the service account when vault.audience changes (the
// token would be valid for something new). Unchanged references are not
// checked again, so a user without these rights can still edit other
// fields of a RedisCluster someone allowed set up. The Secret
// spec.tls.secretName names is checked the same way (tlsAccessChecks).
func accessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	return append(authAccessChecks(old, obj), tlsAccessChecks(old, obj)...)
}

// authAccessChecks are accessChecks' checks of spec.auth.
func authAccessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	auth := obj.Spec.Auth
	if auth == nil {
		return nil
	}
	var oldAuth *cachev1beta1.AuthSpec
	if old != nil {
		oldAuth = old.Spec.Auth
	}
	ns := obj.Namespace
	secret := func(p *field.Path, name, consequence string) accessCheck {
		return accessCheck{path: p, consequence: consequence, attrs: authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "get", Resource: "secrets", Name: name,
		}}
	}
	p := field.NewPath("spec", "auth")
	var checks []accessCheck
	if ref := auth.SecretRef; ref != nil && (oldAuth == nil || !sameSelector(oldAuth.SecretRef, ref)) {
		checks = append(checks, secret(p.Child("secretRef", "name"), ref.Name, "the operator would copy its password into the cluster's own Secret, for the Redis pods and their clients"))
	}
	v := auth.Vault
	if v == nil {
		return checks
	}
	var ov *cachev1beta1.VaultSource
	if oldAuth != nil {
		ov = oldAuth.Vault
	}
	vp := p.Child("vault")
	moved := ov == nil || ov.Address != v.Address
	if ref := v.TokenSecretRef; ref != nil && (moved || !sameSelector(ov.TokenSecretRef, ref)) {
		checks = append(checks, secret(vp.Child("tokenSecretRef", "name"), ref.Name, fmt.Sprintf("the operator would send the Vault token it holds to %s", v.Address)))
	}
	if ref := v.CASecretRef; ref != nil && (ov == nil || !sameSelector(ov.CASecretRef, ref)) {
		checks = append(checks, secret(vp.Child("caSecretRef", "name"), ref.Name, "the operator would read it as Vault's CA bundle"))
	}
	if v.TokenSecretRef == nil {
		sa := loginServiceAccount(obj.Name, v)
		if moved || ov.TokenSecretRef != nil || loginServiceAccount(old.Name, ov) != sa || ov.Audience != v.Audience {
			what := fmt.Sprintf("the operator would request a token of it (audience %q) and send it to %s", v.Audience, v.Address)
			if v.ServiceAccountName == "" {
				what = "serviceAccountName is empty, so the RedisCluster's name is used; " + what
			}
			checks = append(checks, accessCheck{path: vp.Child("serviceAccountName"), consequence: what, attrs: authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: "create", Resource: "serviceaccounts", Subresource: "token", Name: sa,
			}})
		}
	}
	return checks
}

// loginServiceAccount is the service account the controller logs in to
// Vault with (controllers/auth.go): serviceAccountName, or the
// RedisCluster's name when it is empty.
func loginServiceAccount(clusterName string, v *cachev1beta1.VaultSource) string {
	if v.ServiceAccountName != "" {
		return v.ServiceAccountName
	}
	return clusterName
}

func sameSelector(a, b *cachev1beta1.SecretKeySelector) bool {
	return a != nil && b != nil && *a == *b
}

// authorize runs accessChecks for the user of the admission request in
// ctx and turns each denial into a Forbidden error at the field's path.
// Without an AccessReviewer nothing is checked. An error means no answer
// could be had (no admission request, or the review failed): the request
// is refused, never let through unchecked.
func (v *Validator) authorize(ctx context.Context, old, obj *cachev1beta1.RedisCluster) (field.ErrorList, error) {
	if v.Access == nil {
		return nil, nil
	}
	checks := accessChecks(old, obj)
	if len(checks) == 0 {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("checking the requesting user's access: %w", err))
	}
	user := req.UserInfo
	var errs field.ErrorList
	for _, c := range checks {
		allowed, reason, err := v.Access.Review(ctx, user, c.attrs)
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("checking with a SubjectAccessReview whether %q may %s: %w", user.Username, describe(c.attrs), err))
		}
		if allowed {
			continue
		}
		msg := fmt.Sprintf("user %q may not %s, and %s: ask for a Role granting %s", user.Username, describe(c.attrs), c.consequence, grant(c.attrs))
		if reason != "" {
			msg += " (authorizer: " + reason + ")"
		}
		errs = append(errs, field.Forbidden(c.path, msg))
	}
	return errs, nil
}

// describe says what attrs ask for, e.g. `get Secret "x" in namespace "y"`.
func describe(a authorizationv1.ResourceAttributes) string {
	if a.Subresource == "token" {
		return fmt.Sprintf("create serviceaccounts/token for ServiceAccount %q in namespace %q", a.Name, a.Namespace)
	}
	return fmt.Sprintf("%s Secret %q in namespace %q", a.Verb, a.Name, a.Namespace)
}

// grant names the RBAC rule that would allow attrs.
func grant(a authorizationv1.ResourceAttributes) string {
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	return fmt.Sprintf("%s on %s with resourceNames [%s]", a.Verb, resource, a.Name)
}

// checkVaultAddress applies the operator's AddressPolicy to
// spec.auth.vault.address when it is new or changed (an address stored
// before the policy tightened does not block edits of other fields; the
// controller refuses it all the same), and warns about an allowed plain
// http address.
func (v *Validator) checkVaultAddress(old, obj *cachev1beta1.RedisCluster, r *result) {
	vault := vaultOf(obj)
	if vault == nil {
		return
	}
	if u, err := url.Parse(vault.Address); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		// validateVault names the malformed address.
		return
	}
	if ov := vaultOf(old); ov != nil && ov.Address == vault.Address {
		return
	}
	p := field.NewPath("spec", "auth", "vault", "address")
	if err := v.VaultAddresses.Check(vault.Address); err != nil {
		r.add(field.Forbidden(p, strings.TrimPrefix(err.Error(), credentials.ErrAddressNotAllowed.Error()+": ")))
		return
	}
	if strings.HasPrefix(vault.Address, "http://") {
		r.warn(p, "%s is plain http: the Vault token and the password cross the network unencrypted", vault.Address)
	}
}

func vaultOf(rc *cachev1beta1.RedisCluster) *cachev1beta1.VaultSource {
	if rc == nil || rc.Spec.Auth == nil {
		return nil
	}
	return rc.Spec.Auth.Vault
}
