package webhooks

import (
	"fmt"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/acl"
)

// userName mirrors the CRD schema's pattern of spec.users[].name, checked again for objects
// that reach the webhook without it (a v1alpha1 write carries spec.users in its conversion
// annotation, which no schema checks).
var userName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// validateUsers checks spec.users: names valid, not reserved (acl.ReservedNames) and
// distinct (the Secret <cluster>-user-<name> is then a valid name: a cluster name has at
// most 42 characters); rules in Redis 7.0's ACL grammar as spec.users accepts it (acl.ParseRules), each
// error naming the user; exactly one password source.
func validateUsers(users []cachev1beta1.UserSpec, p *field.Path, r *result) {
	seen := map[string]bool{}
	for i := range users {
		u := &users[i]
		up := p.Index(i)
		switch {
		case slices.Contains(acl.ReservedNames, u.Name):
			r.add(field.Forbidden(up.Child("name"), fmt.Sprintf("user %q is reserved: default and %s are the operator's own users (default's password is spec.auth, %s is the exporter sidecar's)", u.Name, acl.ExporterUser, acl.ExporterUser)))
		case !userName.MatchString(u.Name) || len(u.Name) > 63:
			r.add(field.Invalid(up.Child("name"), u.Name, "must be lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 63 characters"))
		case seen[u.Name]:
			r.add(field.Duplicate(up.Child("name"), u.Name))
		}
		seen[u.Name] = true
		if _, err := acl.ParseRules(u.Rules); err != nil {
			r.add(field.Invalid(up.Child("rules"), u.Rules, fmt.Sprintf("user %q: %v", u.Name, err)))
		}
		src := u.PasswordFrom
		switch {
		case src.SecretRef != nil && src.Vault != nil:
			r.add(field.Forbidden(up.Child("passwordFrom", "vault"), fmt.Sprintf("user %q: set only one of secretRef or vault", u.Name)))
		case src.SecretRef == nil && src.Vault == nil:
			r.add(field.Required(up.Child("passwordFrom"), fmt.Sprintf("user %q: set secretRef or vault", u.Name)))
		}
		if ref := src.SecretRef; ref != nil {
			validateSecretKeySelector(ref, up.Child("passwordFrom", "secretRef"), fmt.Sprintf("the Secret holding user %q's password", u.Name), r)
		}
		if v := src.Vault; v != nil {
			validateVault(v, up.Child("passwordFrom", "vault"), r)
		}
		checkGracePeriod(u.RotationGracePeriod, up.Child("rotationGracePeriod"), r)
	}
}
