package credentials

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The operator flags that set an AddressPolicy (BindFlags). The messages of
// ErrAddressNotAllowed name them, so that whoever reads a condition knows
// what to change.
const (
	AllowlistFlag    = "vault-address-allowlist"
	InsecureHTTPFlag = "vault-allow-insecure-http"
	AudiencesFlag    = "vault-audiences"
)

// DefaultAudience is the only service-account token audience an
// AddressPolicy without Audiences allows: what the API documents as
// spec.auth.vault.audience's default, and what Vault's Kubernetes auth
// roles are commonly bound to.
const DefaultAudience = "vault"

// ErrAudienceNotAllowed: a spec asks for a service-account token whose
// audience the operator's policy does not list. Tokens for other audiences
// (the API server's own among them) would be credentials for something
// else than Vault, sent to an address the spec chose. It wraps
// ErrInvalidConfig.
var ErrAudienceNotAllowed = fmt.Errorf("%w: token audience not allowed", ErrInvalidConfig)

// ErrAddressNotAllowed: the Vault address is outside the operator's
// AddressPolicy (not under an allowlisted prefix, or plain http without
// AllowInsecureHTTP). It wraps ErrInvalidConfig, so Reason gives
// ReasonInvalidConfig: retrying cannot help, the spec or the operator's
// flags must change.
var ErrAddressNotAllowed = fmt.Errorf("%w: vault address not allowed", ErrInvalidConfig)

// AddressPolicy says to which Vault addresses the operator may send a
// service-account token or a Vault token. Its zero value allows every
// https address and no plain http one.
//
// Entries of Allowlist are URL prefixes scheme://host[:port][/path]. An
// address matches an entry when its scheme and host are the same (host
// compared case-insensitively, a missing port read as the scheme's default:
// 443 for https, 80 for http) and its path is the entry's path or below
// it, segment by segment: https://vault.example.com/ matches
// https://vault.example.com:443/ and https://vault.example.com/ns but not
// https://vault.example.com.evil.io/ nor https://vault.example.com:8200/.
type AddressPolicy struct {
	// Allowlist holds the allowed URL prefixes; empty allows every address
	// the scheme rule allows.
	Allowlist []string
	// AllowInsecureHTTP permits plain http:// addresses (only those the
	// allowlist allows, if it is set). Without it a token is never sent over
	// plain http.
	AllowInsecureHTTP bool
	// Audiences are the service-account token audiences a spec may ask for
	// (TokenRequest's audiences). Empty allows only DefaultAudience.
	Audiences []string
}

// BindFlags registers --vault-address-allowlist (comma-separated URL
// prefixes; repeating the flag adds more) and --vault-allow-insecure-http
// on fs. A malformed prefix fails flag parsing.
func (p *AddressPolicy) BindFlags(fs *flag.FlagSet) {
	fs.Func(AllowlistFlag,
		"Comma-separated URL prefixes (scheme://host[:port][/path]) of the Vault servers spec.auth.vault.address may name; the operator sends service-account and Vault tokens only there. Empty allows every https address",
		func(value string) error {
			for _, entry := range strings.Split(value, ",") {
				entry = strings.TrimSpace(entry)
				if entry == "" {
					continue
				}
				if _, err := parsePrefix(entry); err != nil {
					return err
				}
				p.Allowlist = append(p.Allowlist, entry)
			}
			return nil
		})
	fs.Func(AudiencesFlag,
		"Comma-separated service-account token audiences a spec's Vault login may ask for (repeating the flag adds more). Default: "+DefaultAudience+" only",
		func(value string) error {
			for _, entry := range strings.Split(value, ",") {
				if entry = strings.TrimSpace(entry); entry != "" {
					p.Audiences = append(p.Audiences, entry)
				}
			}
			return nil
		})
	fs.BoolVar(&p.AllowInsecureHTTP, InsecureHTTPFlag, false,
		"Allow plain http:// Vault addresses: the service-account token, the Vault token and the password then cross the network unencrypted. For tests and local development only")
}

// Validate checks the allowlist's entries: each must be an http or https
// URL with a host and no user, query or fragment, and an http entry needs
// AllowInsecureHTTP (it could never match otherwise).
func (p AddressPolicy) Validate() error {
	var errs []error
	for _, entry := range p.Allowlist {
		u, err := parsePrefix(entry)
		switch {
		case err != nil:
			errs = append(errs, err)
		case u.Scheme == "http" && !p.AllowInsecureHTTP:
			errs = append(errs, fmt.Errorf("--%s entry %q is plain http, which --%s=false refuses", AllowlistFlag, entry, InsecureHTTPFlag))
		}
	}
	return errors.Join(errs...)
}

// Check returns nil when address may receive tokens, or an error wrapping
// ErrAddressNotAllowed that says which rule refused it and which flag
// would change that.
func (p AddressPolicy) Check(address string) error {
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %q is not an http(s) URL with a host", ErrAddressNotAllowed, address)
	}
	if u.Scheme == "http" && !p.AllowInsecureHTTP {
		return fmt.Errorf("%w: %s is plain http, which would send the Vault login token and the password unencrypted; use https, or start the operator with --%s", ErrAddressNotAllowed, address, InsecureHTTPFlag)
	}
	if len(p.Allowlist) == 0 {
		return nil
	}
	for _, entry := range p.Allowlist {
		prefix, err := parsePrefix(entry)
		if err == nil && matches(prefix, u) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not under any prefix of the operator's --%s (%s)", ErrAddressNotAllowed, address, AllowlistFlag, strings.Join(p.Allowlist, ", "))
}

// CheckAudience returns nil when a token for audience may be requested
// (an empty audience reads as DefaultAudience), or an error wrapping
// ErrAudienceNotAllowed naming the allowed ones and the flag.
func (p AddressPolicy) CheckAudience(audience string) error {
	if audience == "" {
		audience = DefaultAudience
	}
	allowed := p.Audiences
	if len(allowed) == 0 {
		allowed = []string{DefaultAudience}
	}
	for _, a := range allowed {
		if a == audience {
			return nil
		}
	}
	return fmt.Errorf("%w: %q is not among the operator's --%s (%s): a token for another audience could be a credential for something other than Vault",
		ErrAudienceNotAllowed, audience, AudiencesFlag, strings.Join(allowed, ", "))
}

// parsePrefix parses one --vault-address-allowlist entry.
func parsePrefix(entry string) (*url.URL, error) {
	return ParseURLPrefix(AllowlistFlag, "https://vault.example.com/", entry)
}

// ParseURLPrefix parses entry, one URL prefix of allowlist flag flagName
// (without the dashes): an http or https URL with a host and no user,
// query or fragment. Its errors name the flag and the entry, and give
// example as a valid one.
func ParseURLPrefix(flagName, example, entry string) (*url.URL, error) {
	u, err := url.Parse(entry)
	switch {
	case err != nil:
		return nil, fmt.Errorf("--%s entry %q: %v", flagName, entry, err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, fmt.Errorf("--%s entry %q is not an http(s) URL with a host, such as %s", flagName, entry, example)
	case u.User != nil, u.RawQuery != "", u.Fragment != "":
		return nil, fmt.Errorf("--%s entry %q may not hold a user, a query or a fragment", flagName, entry)
	}
	return u, nil
}

// matches reports whether u is at or below prefix (see AddressPolicy).
func matches(prefix, u *url.URL) bool { return URLUnder(prefix, u) }

// URLUnder reports whether u is at or below prefix: the same scheme and
// host (compared case-insensitively), the same port (a missing one read as
// the scheme's default, 443 for https and 80 for http), and u's path the
// prefix's or below it, segment by segment (https://h/a matches
// https://h/a/b, not https://h/ab).
func URLUnder(prefix, u *url.URL) bool {
	if !strings.EqualFold(prefix.Scheme, u.Scheme) || !strings.EqualFold(prefix.Hostname(), u.Hostname()) ||
		effectivePort(prefix) != effectivePort(u) {
		return false
	}
	base := strings.TrimSuffix(prefix.Path, "/")
	return base == "" || u.Path == base || strings.HasPrefix(u.Path, base+"/")
}

func effectivePort(u *url.URL) string {
	if port := u.Port(); port != "" {
		return port
	}
	if strings.EqualFold(u.Scheme, "http") {
		return "80"
	}
	return "443"
}

// guardedTransport refuses every request, including the redirects the
// Vault client follows on its own (a standby's 307 to the active node),
// whose URL the policy does not allow: the X-Vault-Token header and the
// login's JWT go only where the policy says.
type guardedTransport struct {
	policy AddressPolicy
	next   http.RoundTripper
}

func (t guardedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.policy.Check(req.URL.String()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.next.RoundTrip(req)
}
