package v1beta1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// UserSpec is one declarative Redis ACL user (Redis ACL documentation,
// https://redis.io/docs/latest/operate/oss_and_stack/management/security/acl/).
// The operator applies it on every node with ACL SETUSER <name> reset on
// #<sha256 of each password> <rules...>, so a change of rules replaces the
// old ones in place; a user removed from spec.users is deleted (ACL DELUSER).
// The user's password, read from passwordFrom, is published for clients in
// the operator-owned Secret <cluster>-user-<name> (keys username and
// password); clients read it there, as they read the default user's
// password from <cluster>-auth.
type UserSpec struct {
	// Name is the ACL user name. Lowercase letters, digits, '-' and '.',
	// starting and ending with a letter or digit, at most 63 characters
	// (it is part of a Secret name). "default" and "redis-operator-exporter" are the
	// operator's own users (spec.auth's, and the exporter sidecar's) and are
	// refused.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self != 'default' && self != 'redis-operator-exporter'",message="default and redis-operator-exporter are the operator's own users: default's password is spec.auth, redis-operator-exporter is the exporter sidecar's"
	// +required
	Name string `json:"name"`

	// Rules are the user's ACL rules, separated by spaces, in the grammar of
	// ACL SETUSER: key patterns (~app:*, %R~ro:*, allkeys, resetkeys),
	// channel patterns (&chan:*, allchannels, resetchannels), commands and
	// categories (+@read, -@dangerous, +get, +client|setname, allcommands,
	// nocommands), on, off, sanitize-payload, skip-sanitize-payload. Rules
	// that set or clear passwords (>, <, #, !, nopass, resetpass), reset
	// and selectors ((...), clearselectors) are refused: the operator owns
	// the passwords. For example "~app:* +@read +@write".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +required
	Rules string `json:"rules"`

	// PasswordFrom is where the user's password comes from.
	// +required
	PasswordFrom UserPasswordSource `json:"passwordFrom"`

	// RotationGracePeriod is how long the old and the new password are both
	// accepted after the new one is published in <cluster>-user-<name>.
	// Defaults to 60s.
	// +kubebuilder:default="60s"
	// +optional
	RotationGracePeriod *metav1.Duration `json:"rotationGracePeriod,omitempty"`
}

// UserPasswordSource is a Secret key or a Vault KV v2 secret read with the
// same Kubernetes auth (or token) settings as spec.auth.vault.
//
// +kubebuilder:validation:XValidation:rule="has(self.secretRef) != has(self.vault)",message="exactly one of secretRef or vault must be set"
type UserPasswordSource struct {
	// SecretRef names a Secret in the RedisCluster's namespace and its key.
	// +optional
	SecretRef *SecretKeySelector `json:"secretRef,omitempty"`

	// Vault reads the password from a Vault KV v2 secret.
	// +optional
	Vault *VaultSource `json:"vault,omitempty"`
}

// UserStatus is one ACL user as last applied. It never holds a password or
// a hash of one.
type UserStatus struct {
	// Name is the ACL user name.
	// +kubebuilder:validation:MaxLength=63
	// +required
	Name string `json:"name"`

	// Source is Secret or Vault.
	// +kubebuilder:validation:Enum=Secret;Vault
	// +optional
	Source string `json:"source,omitempty"`

	// Version identifies the live password's source version, as in
	// status.credentials.version.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Version string `json:"version,omitempty"`

	// RotationStep is the step of a password rotation in progress (empty
	// when none): AddingPassword, UpdatingSecret, GracePeriod,
	// RemovingOldPassword.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	RotationStep string `json:"rotationStep,omitempty"`

	// Applied is true once the user, with its current rules and passwords,
	// is set on every node that runs.
	// +optional
	Applied bool `json:"applied,omitempty"`

	// Message says why the user is not applied or its source not read; empty
	// when all is well.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// LastRotationTime is when the user's last rotation finished.
	// +optional
	LastRotationTime *metav1.Time `json:"lastRotationTime,omitempty"`
}
