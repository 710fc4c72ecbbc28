// Package credentials reads the Redis password from where spec.auth says it
// lives: a Kubernetes Secret, or a Vault KV v2 secret read with Vault's
// Kubernetes auth method (or a Vault token, for dev setups).
//
// A Source returns a Credential: the password, wrapped in a type that never
// prints, plus a version string that changes exactly when the source's
// content changes and is safe for status, events and logs. Fetch errors wrap
// one of the sentinel errors below, so a controller can set
// CredentialsReady=False with Reason(err) and keep the last good password.
//
// The package does not depend on controller-runtime; Kubernetes access is
// through small function types (TokenFunc, SecretGetter) with client-go
// implementations here.
package credentials

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
)

// Source is where a Redis password comes from.
type Source interface {
	// Fetch reads the current credential. Errors wrap one of the sentinel
	// errors of this package (see Reason), or are the context's error.
	Fetch(ctx context.Context) (Credential, error)
}

// Credential is one password and the version it was read at.
type Credential struct {
	// Password is the secret itself; it prints as "[redacted]" everywhere.
	// Use Password.Reveal only where the bytes must go (Redis, a Secret).
	Password Password
	// Version identifies the content, never the secret: for Vault
	// "vault:<mount>/data/<path>#v<N>" (N is the KV v2 version), for a Secret
	// "secret:<namespace>/<name>#<resourceVersion>". A change of Version
	// means the source changed; the password may still be the same one.
	Version string
}

// redacted is what a Password prints as.
const redacted = "[redacted]"

// Password is a secret string that never prints: fmt (every verb), JSON
// (also as a map key), encoding.TextMarshaler users, slog and logr all show
// "[redacted]". It holds the string behind a pointer, so that even
// reflection-based printing of a struct with an unexported Password field
// shows an address, not the text. Reveal returns the plaintext; compare with
// Equal. The zero value is the empty password.
type Password struct {
	p *string
}

// NewPassword wraps s.
func NewPassword(s string) Password { return Password{p: &s} }

// Reveal returns the password itself.
func (p Password) Reveal() string {
	if p.p == nil {
		return ""
	}
	return *p.p
}

// IsZero reports whether the password is empty.
func (p Password) IsZero() bool { return p.Reveal() == "" }

// Equal compares two passwords in constant time (for equal lengths).
func (p Password) Equal(o Password) bool {
	return subtle.ConstantTimeCompare([]byte(p.Reveal()), []byte(o.Reveal())) == 1
}

// String implements fmt.Stringer.
func (Password) String() string { return redacted }

// GoString implements fmt.GoStringer (%#v).
func (Password) GoString() string { return redacted }

// Format implements fmt.Formatter, so no verb (%s, %q, %x, %d, ...) reaches
// the password.
func (Password) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// MarshalJSON implements json.Marshaler.
func (Password) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText implements encoding.TextMarshaler (JSON map keys, YAML, zap).
func (Password) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// LogValue implements slog.LogValuer.
func (Password) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalLog implements logr.Marshaler.
func (Password) MarshalLog() any { return redacted }

// Sentinel errors wrapped by Fetch. Reason maps them to condition reasons.
var (
	// ErrInvalidConfig: the source's settings cannot work (missing address,
	// mount, path, key or role; a bad CA PEM; an unparsable address).
	ErrInvalidConfig = errors.New("invalid credentials source configuration")
	// ErrVaultUnreachable: no answer from Vault (connection refused, DNS,
	// timeout, TLS handshake failure) or a 502/503/504 (sealed, standby
	// without forwarding, overloaded).
	ErrVaultUnreachable = errors.New("vault unreachable")
	// ErrAuthFailed: Vault refused the login (unknown role, service account
	// not bound to the role, token review failed), or the token for the
	// login could not be had (TokenRequest or the token Secret failed).
	ErrAuthFailed = errors.New("vault authentication failed")
	// ErrPermissionDenied: the token is valid but its policies do not allow
	// reading the path (Vault 403), or the Kubernetes API refused to give
	// the Secret (403).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrSecretNotFound: no secret at the path, the pinned version does not
	// exist, or the version read was deleted or destroyed.
	ErrSecretNotFound = errors.New("secret not found")
	// ErrKeyMissing: the secret exists but has no such key.
	ErrKeyMissing = errors.New("key missing from secret")
	// ErrInvalidPassword: the key's value is empty or not a string.
	ErrInvalidPassword = errors.New("invalid password value")
	// ErrVaultError: any other error answer from Vault (e.g. 500, 400).
	ErrVaultError = errors.New("vault error")
	// ErrKubernetesAPI: the Kubernetes API failed in another way while
	// reading a Secret.
	ErrKubernetesAPI = errors.New("kubernetes API error")
)

// Reasons returned by Reason: CamelCase, fit for a condition's reason field.
const (
	ReasonInvalidConfig        = "InvalidConfig"
	ReasonVaultUnreachable     = "VaultUnreachable"
	ReasonAuthenticationFailed = "AuthenticationFailed"
	ReasonPermissionDenied     = "PermissionDenied"
	ReasonSecretNotFound       = "SecretNotFound"
	ReasonKeyMissing           = "KeyMissing"
	ReasonInvalidPassword      = "InvalidPassword"
	ReasonVaultError           = "VaultError"
	ReasonKubernetesAPIError   = "KubernetesAPIError"
	ReasonFetchFailed          = "FetchFailed"
)

// Reason maps a Fetch error to a condition reason; "" for nil, and
// ReasonFetchFailed for errors of no known kind (e.g. a canceled context).
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrInvalidConfig):
		return ReasonInvalidConfig
	case errors.Is(err, ErrVaultUnreachable):
		return ReasonVaultUnreachable
	case errors.Is(err, ErrAuthFailed):
		return ReasonAuthenticationFailed
	case errors.Is(err, ErrPermissionDenied):
		return ReasonPermissionDenied
	case errors.Is(err, ErrSecretNotFound):
		return ReasonSecretNotFound
	case errors.Is(err, ErrKeyMissing):
		return ReasonKeyMissing
	case errors.Is(err, ErrInvalidPassword):
		return ReasonInvalidPassword
	case errors.Is(err, ErrVaultError):
		return ReasonVaultError
	case errors.Is(err, ErrKubernetesAPI):
		return ReasonKubernetesAPIError
	default:
		return ReasonFetchFailed
	}
}

// passwordFrom checks a value read at key and returns it as a Password.
func passwordFrom(value any, key, where string) (Password, error) {
	s, ok := value.(string)
	if !ok {
		return Password{}, fmt.Errorf("%w: key %q of %s is not a string", ErrInvalidPassword, key, where)
	}
	if s == "" {
		return Password{}, fmt.Errorf("%w: key %q of %s is empty", ErrInvalidPassword, key, where)
	}
	return NewPassword(s), nil
}
