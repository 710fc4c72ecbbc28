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
// behalf with its own, wider rights (references.go has the rules): every
// Secret spec.auth, spec.tls, spec.users and spec.bootstrap.fromBackup
// name, every service-account token a Vault login of theirs mints, and
// the pod creation spec.pod's extras amount to.
//
// A reference is checked when it is new or changed; Vault logins also when
// their address changes (the token would go somewhere new) or their
// audience does (the token would be valid for something new). Unchanged
// references are not checked again, so a user without these rights can
// still edit other fields of a RedisCluster someone allowed set up.
func accessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	checks := authAccessChecks(old, obj)
	checks = append(checks, tlsAccessChecks(old, obj)...)
	checks = append(checks, userAccessChecks(old, obj)...)
	checks = append(checks, restoreAccessChecks(old, obj)...)
	checks = append(checks, podExtrasAccessChecks(old, obj)...)
	checks = append(checks, dataAccessChecks(old, obj)...)
	checks = append(checks, exposureAccessChecks(old, obj)...)
	return checks
}

// authAccessChecks are accessChecks' checks of spec.auth: its secretRef,
// and its Vault login (vaultAccessChecks).
func authAccessChecks(old, obj *cachev1beta1.RedisCluster) []accessCheck {
	auth := obj.Spec.Auth
	if auth == nil {
		return nil
	}
	var oldAuth *cachev1beta1.AuthSpec
	if old != nil {
		oldAuth = old.Spec.Auth
	}
	p := field.NewPath("spec", "auth")
	var checks []accessCheck
	if ref := auth.SecretRef; ref != nil && (oldAuth == nil || !sameSelector(oldAuth.SecretRef, ref)) {
		checks = append(checks, secretCheck(obj.Namespace, ref.Name, p.Child("secretRef", "name"), "the operator would copy its password into the cluster's own Secret, for the Redis pods and their clients"))
	}
	if auth.Vault != nil {
		var ov *cachev1beta1.VaultSource
		oldSA := ""
		if oldAuth != nil && oldAuth.Vault != nil {
			ov, oldSA = oldAuth.Vault, loginServiceAccount(old.Name, oldAuth.Vault)
		}
		checks = append(checks, vaultAccessChecks(obj.Namespace, p.Child("vault"), ov, oldSA, auth.Vault, loginServiceAccount(obj.Name, auth.Vault))...)
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
// ctx (reviewAccess). Without an AccessReviewer nothing is checked.
func (v *Validator) authorize(ctx context.Context, old, obj *cachev1beta1.RedisCluster) (field.ErrorList, error) {
	if v.Access == nil {
		return nil, nil
	}
	return reviewAccess(ctx, v.Access, accessChecks(old, obj))
}

// reviewAccess asks access, for the user of the admission request in ctx,
// about each check and turns each denial into a Forbidden error at the
// check's path, naming the permission, what the operator would do with it
// and the RBAC rule that would allow it. An error means no answer could be
// had (no admission request, or a review failed): the request is then
// refused, never let through unchecked.
func reviewAccess(ctx context.Context, access AccessReviewer, checks []accessCheck) (field.ErrorList, error) {
	if len(checks) == 0 {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("checking the requesting user's access: %w", err))
	}
	user := req.UserInfo
	var errs field.ErrorList
	asked := map[authorizationv1.ResourceAttributes]bool{}
	for _, c := range checks {
		if asked[c.attrs] {
			// One answer per permission: a Secret named twice is one review.
			continue
		}
		asked[c.attrs] = true
		allowed, reason, err := access.Review(ctx, user, c.attrs)
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

// kindOf names a core resource by its kind, for messages.
var kindOf = map[string]string{
	"secrets":                "Secret",
	"configmaps":             "ConfigMap",
	"persistentvolumeclaims": "PersistentVolumeClaim",
	"serviceaccounts":        "ServiceAccount",
}

// describe says what attrs ask for, e.g. `get Secret "x" in namespace "y"`.
func describe(a authorizationv1.ResourceAttributes) string {
	switch {
	case a.Subresource == "token":
		return fmt.Sprintf("create serviceaccounts/token for ServiceAccount %q in namespace %q", a.Name, a.Namespace)
	case a.Name == "":
		return fmt.Sprintf("%s %s in namespace %q", a.Verb, a.Resource, a.Namespace)
	case kindOf[a.Resource] != "":
		return fmt.Sprintf("%s %s %q in namespace %q", a.Verb, kindOf[a.Resource], a.Name, a.Namespace)
	}
	return fmt.Sprintf("%s %s %q in namespace %q", a.Verb, a.Resource, a.Name, a.Namespace)
}

// grant names the RBAC rule that would allow attrs.
func grant(a authorizationv1.ResourceAttributes) string {
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Name == "" {
		return fmt.Sprintf("%s on %s", a.Verb, resource)
	}
	return fmt.Sprintf("%s on %s with resourceNames [%s]", a.Verb, resource, a.Name)
}

// checkVaultAddress applies the operator's AddressPolicy to every Vault
// login of the spec (vaultLogins) whose address or audience is new or
// changed (one stored before the policy tightened does not block edits of
// other fields; the controller refuses it all the same): the address must
// be allowed, and so must the audience of the service-account token it
// would receive. An allowed plain http address draws a warning.
func (v *Validator) checkVaultAddress(old, obj *cachev1beta1.RedisCluster, r *result) {
	before := map[string]*cachev1beta1.VaultSource{}
	for _, l := range vaultLogins(old) {
		before[l.key] = l.vault
	}
	for _, l := range vaultLogins(obj) {
		checkVaultPolicy(v.VaultAddresses, before[l.key], l.vault, l.path, r)
	}
}

// checkVaultPolicy applies policy to the Vault login vault at p, over old
// (nil when new).
func checkVaultPolicy(policy credentials.AddressPolicy, old, vault *cachev1beta1.VaultSource, p *field.Path, r *result) {
	if u, err := url.Parse(vault.Address); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		// validateVault names the malformed address.
		return
	}
	if old == nil || old.Address != vault.Address {
		ap := p.Child("address")
		if err := policy.Check(vault.Address); err != nil {
			r.add(field.Forbidden(ap, strings.TrimPrefix(err.Error(), credentials.ErrAddressNotAllowed.Error()+": ")))
			return
		}
		if strings.HasPrefix(vault.Address, "http://") {
			r.warn(ap, "%s is plain http: the Vault token and the password cross the network unencrypted", vault.Address)
		}
	}
	if vault.TokenSecretRef == nil && (old == nil || old.Audience != vault.Audience || old.TokenSecretRef != nil) {
		if err := policy.CheckAudience(vault.Audience); err != nil {
			r.add(field.Forbidden(p.Child("audience"), strings.TrimPrefix(err.Error(), credentials.ErrAudienceNotAllowed.Error()+": ")))
		}
	}
}

// vaultLogin is one Vault login a spec configures, keyed so that the same
// login can be found in the old object (a user's by its name).
type vaultLogin struct {
	key   string
	path  *field.Path
	vault *cachev1beta1.VaultSource
}

// vaultLogins lists rc's Vault logins: spec.auth.vault, each user's
// passwordFrom.vault and spec.bootstrap.fromBackup.objectStore's
// credentialsVault. Nil rc has none.
func vaultLogins(rc *cachev1beta1.RedisCluster) []vaultLogin {
	if rc == nil {
		return nil
	}
	var out []vaultLogin
	if v := vaultOf(rc); v != nil {
		out = append(out, vaultLogin{key: "auth", path: field.NewPath("spec", "auth", "vault"), vault: v})
	}
	for i := range rc.Spec.Users {
		if v := rc.Spec.Users[i].PasswordFrom.Vault; v != nil {
			out = append(out, vaultLogin{key: "user/" + rc.Spec.Users[i].Name, path: field.NewPath("spec", "users").Index(i).Child("passwordFrom", "vault"), vault: v})
		}
	}
	if s := restoreStore(rc); s != nil && s.CredentialsVault != nil {
		out = append(out, vaultLogin{key: "restore", path: field.NewPath("spec", "bootstrap", "fromBackup", "objectStore", "credentialsVault", "vault"), vault: &s.CredentialsVault.Vault})
	}
	return out
}

func vaultOf(rc *cachev1beta1.RedisCluster) *cachev1beta1.VaultSource {
	if rc == nil || rc.Spec.Auth == nil {
		return nil
	}
	return rc.Spec.Auth.Vault
}
