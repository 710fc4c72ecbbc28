package credentials

import (
	"context"
	"encoding/pem"
	"errors"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestAddressPolicyCheck(t *testing.T) {
	list := AddressPolicy{Allowlist: []string{"https://vault.example.com/", "https://proxy.example.com:8443/vault", "https://VAULT2"}}
	for _, tc := range []struct {
		policy  AddressPolicy
		address string
		allowed bool
	}{
		{AddressPolicy{}, "https://anything.example:8200", true},
		{AddressPolicy{}, "http://vault.example.com", false},
		{AddressPolicy{}, "ftp://vault.example.com", false},
		{AddressPolicy{}, "vault.example.com:8200", false},
		{AddressPolicy{AllowInsecureHTTP: true}, "http://127.0.0.1:8200", true},

		{list, "https://vault.example.com", true},
		{list, "https://vault.example.com:443/", true},
		{list, "https://Vault.Example.com/ns/team", true},
		{list, "https://vault.example.com:8200", false},
		{list, "https://vault.example.com.evil.io/", false},
		{list, "https://vault.example.com@evil.io/", false},
		{list, "https://evil.io/https://vault.example.com/", false},
		{list, "http://vault.example.com/", false},
		{list, "https://proxy.example.com:8443/vault", true},
		{list, "https://proxy.example.com:8443/vault/v1/secret", true},
		{list, "https://proxy.example.com:8443/vaultx", false},
		{list, "https://proxy.example.com/vault", false},
		{list, "https://vault2:443/", true},
		// http needs the flag even when the allowlist names the host.
		{AddressPolicy{Allowlist: []string{"http://127.0.0.1:8200/"}}, "http://127.0.0.1:8200", false},
		{AddressPolicy{Allowlist: []string{"http://127.0.0.1:8200/"}, AllowInsecureHTTP: true}, "http://127.0.0.1:8200", true},
		{AddressPolicy{Allowlist: []string{"http://127.0.0.1:8200/"}, AllowInsecureHTTP: true}, "http://127.0.0.1:8201", false},
	} {
		err := tc.policy.Check(tc.address)
		if (err == nil) != tc.allowed {
			t.Errorf("%+v.Check(%q) = %v, want allowed %v", tc.policy, tc.address, err, tc.allowed)
		}
		if err != nil && (!errors.Is(err, ErrAddressNotAllowed) || !errors.Is(err, ErrInvalidConfig) || Reason(err) != ReasonInvalidConfig) {
			t.Errorf("Check(%q) = %v, want ErrAddressNotAllowed (an ErrInvalidConfig)", tc.address, err)
		}
	}
	// The refusals say which flag would change them.
	if err := (AddressPolicy{}).Check("http://vault:8200"); !strings.Contains(err.Error(), "--"+InsecureHTTPFlag) {
		t.Errorf("http refusal %q does not name --%s", err, InsecureHTTPFlag)
	}
	if err := list.Check("https://evil.io"); !strings.Contains(err.Error(), "--"+AllowlistFlag) || !strings.Contains(err.Error(), "https://vault.example.com/") {
		t.Errorf("allowlist refusal %q does not name --%s and its entries", err, AllowlistFlag)
	}
}

func TestAddressPolicyFlags(t *testing.T) {
	var p AddressPolicy
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	p.BindFlags(fs)
	if err := fs.Parse([]string{"--" + AllowlistFlag + "=https://a.example/, https://b.example:8200/x", "--" + AllowlistFlag + "=https://c.example", "--" + InsecureHTTPFlag}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Allowlist, " ") != "https://a.example/ https://b.example:8200/x https://c.example" || !p.AllowInsecureHTTP {
		t.Fatalf("parsed %+v", p)
	}
	for _, bad := range []string{"vault.example.com", "https://", "https://u:p@vault/", "https://vault/?x=1", "https://vault/#f"} {
		var q AddressPolicy
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(&strings.Builder{})
		q.BindFlags(fs)
		if err := fs.Parse([]string{"--" + AllowlistFlag + "=" + bad}); err == nil {
			t.Errorf("allowlist entry %q accepted", bad)
		}
	}
	if err := (AddressPolicy{Allowlist: []string{"http://vault/"}}).Validate(); err == nil {
		t.Error("an http allowlist entry without AllowInsecureHTTP validates")
	}
	if err := (AddressPolicy{Allowlist: []string{"http://vault/", "https://vault2/"}, AllowInsecureHTTP: true}).Validate(); err != nil {
		t.Errorf("valid policy: %v", err)
	}
}

// TestVaultSourceSendsNoTokenOutsideThePolicy: a source for a refused
// address is never built, and an allowed Vault that redirects to a server
// outside the allowlist (as a standby redirects to its active node) does
// not make the source send the token there. Both servers are real HTTPS
// listeners on 127.0.0.1 that count what reaches them.
func TestVaultSourceSendsNoTokenOutsideThePolicy(t *testing.T) {
	const token = "hvs.token-that-must-stay-home"
	var thiefHits atomic.Int32
	thief := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		thiefHits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(thief.Close)
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, thief.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	// Both test servers share one certificate for 127.0.0.1.
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: redirector.Certificate().Raw})

	cfg := VaultConfig{
		Address: redirector.URL, CACert: ca, Mount: "secret", Path: "redis/prod", Key: "password",
		Addresses: AddressPolicy{Allowlist: []string{redirector.URL + "/"}},
		Auth:      VaultAuth{Token: func(context.Context) (string, error) { return token, nil }},
	}
	err := fetchErr(t, mustSource(t, cfg), ErrAddressNotAllowed)
	if Reason(err) != ReasonInvalidConfig || strings.Contains(err.Error(), token) {
		t.Fatalf("redirect outside the allowlist: Reason %q, err %v", Reason(err), err)
	}
	if n := thiefHits.Load(); n != 0 {
		t.Fatalf("the server outside the allowlist got %d requests", n)
	}

	// Not in the allowlist, and plain http by default: refused before any
	// connection.
	var conns atomic.Int32
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			_ = c.Close()
		}
	}()
	for name, c := range map[string]VaultConfig{
		"plain http": {Address: "http://" + l.Addr().String()},
		"not listed": {Address: "https://" + l.Addr().String(), Addresses: AddressPolicy{Allowlist: []string{redirector.URL + "/"}}},
	} {
		c.Mount, c.Path, c.Key, c.Auth = cfg.Mount, cfg.Path, cfg.Key, cfg.Auth
		if _, err := NewVaultSource(c); !errors.Is(err, ErrAddressNotAllowed) {
			t.Errorf("%s: NewVaultSource err = %v, want ErrAddressNotAllowed", name, err)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections to a refused address", n)
	}
}

func TestCheckAudience(t *testing.T) {
	for _, c := range []struct {
		policy   AddressPolicy
		audience string
		ok       bool
	}{
		{AddressPolicy{}, "", true},
		{AddressPolicy{}, "vault", true},
		{AddressPolicy{}, "https://kubernetes.default.svc.cluster.local", false},
		{AddressPolicy{}, "api", false},
		{AddressPolicy{Audiences: []string{"vault", "vault-prod"}}, "vault-prod", true},
		{AddressPolicy{Audiences: []string{"vault-prod"}}, "vault", false},
	} {
		err := c.policy.CheckAudience(c.audience)
		if (err == nil) != c.ok {
			t.Errorf("%+v CheckAudience(%q) = %v, want ok=%v", c.policy, c.audience, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrAudienceNotAllowed) || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "--"+AudiencesFlag)) {
			t.Errorf("CheckAudience(%q) = %v: want ErrAudienceNotAllowed naming --%s", c.audience, err, AudiencesFlag)
		}
	}
}
