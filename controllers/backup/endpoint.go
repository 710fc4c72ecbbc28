package backup

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis-operator/redis-operator/controllers/credentials"
)

// The operator flags that set an EndpointPolicy (BindFlags). The messages
// of ErrEndpointNotAllowed name them, so that whoever reads a condition
// knows what an administrator would change.
const (
	EndpointAllowlistFlag    = "object-store-endpoint-allowlist"
	EndpointInsecureHTTPFlag = "object-store-allow-insecure-http"
)

// ErrEndpointNotAllowed: an object store endpoint is outside the
// operator's EndpointPolicy. No request is sent to it and no Secret or
// Vault secret is read for it; retrying cannot help, the spec or the
// operator's flags must change.
var ErrEndpointNotAllowed = errors.New("object store endpoint not allowed")

// EndpointPolicy says to which object store endpoints the operator may
// send requests (signed with the keys a spec names, carrying a cluster's
// data). Its zero value allows every http and https endpoint, as the
// operator did before the policy existed.
//
// Entries of Allowlist are URL prefixes scheme://host[:port][/path],
// matched as credentials.AddressPolicy matches Vault addresses: the same
// scheme and host (host compared case-insensitively, a missing port read
// as the scheme's default: 443 for https, 80 for http), and the
// endpoint's path the entry's or below it, segment by segment.
// https://s3.example.com/ matches https://s3.example.com:443 but not
// https://s3.example.com.evil.io nor https://s3.example.com:9000. An
// endpoint has no path (the schema allows none), so give entries without
// one. Requests in virtual-host style go to <bucket>.<host> of the
// endpoint allowed; redirects are never followed.
type EndpointPolicy struct {
	// Allowlist holds the allowed URL prefixes; empty allows every endpoint
	// the scheme rule allows.
	Allowlist []string
	// DenyInsecureHTTP refuses plain http:// endpoints (flag
	// --object-store-allow-insecure-http=false). The default allows them,
	// as the schema does: over http the signed requests (not the secret
	// key itself) and the backups' data cross the network unencrypted.
	DenyInsecureHTTP bool
}

// BindFlags registers --object-store-endpoint-allowlist (comma-separated
// URL prefixes; repeating the flag adds more) and
// --object-store-allow-insecure-http (default true) on fs. A malformed
// prefix fails flag parsing.
func (p *EndpointPolicy) BindFlags(fs *flag.FlagSet) {
	fs.Func(EndpointAllowlistFlag,
		"Comma-separated URL prefixes (scheme://host[:port][/path]) of the S3 endpoints backups, retention and restores may send requests to (spec.objectStore.endpoint, spec.bootstrap.fromBackup.objectStore.endpoint); repeating the flag adds more. Empty allows every endpoint",
		func(value string) error {
			for _, entry := range strings.Split(value, ",") {
				entry = strings.TrimSpace(entry)
				if entry == "" {
					continue
				}
				if _, err := parseEndpointPrefix(entry); err != nil {
					return err
				}
				p.Allowlist = append(p.Allowlist, entry)
			}
			return nil
		})
	fs.Var(&allowHTTPFlag{p: p}, EndpointInsecureHTTPFlag,
		"Allow plain http:// object store endpoints (the schema allows them): the signed requests and the backups' data then cross the network unencrypted. Set false to refuse them")
}

// allowHTTPFlag is --object-store-allow-insecure-http: a boolean flag,
// true by default, stored inverted in DenyInsecureHTTP so that the zero
// EndpointPolicy keeps allowing http.
type allowHTTPFlag struct{ p *EndpointPolicy }

func (f *allowHTTPFlag) String() string {
	if f == nil || f.p == nil {
		return "false" // flag.PrintDefaults' zero value: the default, true, is then printed
	}
	return strconv.FormatBool(!f.p.DenyInsecureHTTP)
}

func (f *allowHTTPFlag) Set(v string) error {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	f.p.DenyInsecureHTTP = !b
	return nil
}

func (f *allowHTTPFlag) IsBoolFlag() bool { return true }

// Validate checks the allowlist's entries: each an http or https URL with
// a host and no user, query or fragment; an http entry needs http allowed
// (it could never match otherwise).
func (p EndpointPolicy) Validate() error {
	var errs []error
	for _, entry := range p.Allowlist {
		u, err := parseEndpointPrefix(entry)
		switch {
		case err != nil:
			errs = append(errs, err)
		case u.Scheme == "http" && p.DenyInsecureHTTP:
			errs = append(errs, fmt.Errorf("--%s entry %q is plain http, which --%s=false refuses", EndpointAllowlistFlag, entry, EndpointInsecureHTTPFlag))
		}
	}
	return errors.Join(errs...)
}

// Check returns nil when requests may be sent to endpoint, or an error
// wrapping ErrEndpointNotAllowed that says which rule refused it and which
// flag would change that. The endpoint must be what NewStore accepts: an
// http(s) URL with a host and no user, query, fragment or path.
func (p EndpointPolicy) Check(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("%w: %s is not an http(s)://host[:port] URL", ErrEndpointNotAllowed, quoteShort(endpoint))
	}
	if u.Scheme == "http" && p.DenyInsecureHTTP {
		return fmt.Errorf("%w: %s is plain http, which the operator refuses (--%s=false); use https", ErrEndpointNotAllowed, endpoint, EndpointInsecureHTTPFlag)
	}
	if len(p.Allowlist) == 0 {
		return nil
	}
	for _, entry := range p.Allowlist {
		prefix, err := parseEndpointPrefix(entry)
		if err == nil && credentials.URLUnder(prefix, u) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is not under any prefix of the operator's --%s (%s)", ErrEndpointNotAllowed, endpoint,
		EndpointAllowlistFlag, strings.Join(p.Allowlist, ", "))
}

// parseEndpointPrefix parses one --object-store-endpoint-allowlist entry.
func parseEndpointPrefix(entry string) (*url.URL, error) {
	return credentials.ParseURLPrefix(EndpointAllowlistFlag, "https://s3.eu-west-1.amazonaws.com", entry)
}
