package credentials

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

const plaintext = "s3cr3t-Pa55word"

func TestPasswordNeverPrints(t *testing.T) {
	cred := Credential{Password: NewPassword(plaintext), Version: "vault:secret/data/redis#v3"}
	hidden := struct {
		name string
		pw   Password
	}{"unexported", cred.Password}
	var out []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
		out = append(out, fmt.Sprintf(verb, cred), fmt.Sprintf(verb, cred.Password), fmt.Sprintf(verb, &cred))
	}
	out = append(out, fmt.Sprintf("%v %+v %#v", hidden, hidden, hidden))
	out = append(out, fmt.Sprint(cred), fmt.Sprintln(cred.Password), cred.Password.String(), cred.Password.GoString())

	js, err := json.Marshal(cred)
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(js))
	mapJS, err := json.Marshal(map[Password]string{cred.Password: "x"})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, string(mapJS))

	var slogBuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&slogBuf, nil)).Info("Fetched", "credential", cred, "password", cred.Password)
	slog.New(slog.NewTextHandler(&slogBuf, nil)).Info("Fetched", "password", cred.Password)
	out = append(out, slogBuf.String())

	var logrBuf strings.Builder
	logr := funcr.New(func(prefix, args string) { logrBuf.WriteString(prefix + args + "\n") }, funcr.Options{})
	logr.Info("Fetched", "credential", cred, "password", cred.Password)
	out = append(out, logrBuf.String())

	all := strings.Join(out, "\n")
	if strings.Contains(all, plaintext) {
		t.Fatalf("the password leaked into printed output:\n%s", all)
	}
	if !strings.Contains(all, redacted) || !strings.Contains(all, cred.Version) {
		t.Fatalf("output lacks the redaction marker or the version:\n%s", all)
	}
	if cred.Password.Reveal() != plaintext {
		t.Fatalf("Reveal = %q, want the plaintext", cred.Password.Reveal())
	}
	if !cred.Password.Equal(NewPassword(plaintext)) || cred.Password.Equal(NewPassword("other")) || !(Password{}).IsZero() {
		t.Fatal("Equal or IsZero gives a wrong answer")
	}
}

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{fmt.Errorf("%w: x", ErrVaultUnreachable), ReasonVaultUnreachable},
		{fmt.Errorf("reading: %w", fmt.Errorf("%w: 403", ErrPermissionDenied)), ReasonPermissionDenied},
		{fmt.Errorf("%w: getting the Vault token: %w", ErrAuthFailed, ErrSecretNotFound), ReasonAuthenticationFailed},
		{fmt.Errorf("%w", ErrSecretNotFound), ReasonSecretNotFound},
		{ErrKeyMissing, ReasonKeyMissing},
		{ErrInvalidPassword, ReasonInvalidPassword},
		{ErrInvalidConfig, ReasonInvalidConfig},
		{ErrVaultError, ReasonVaultError},
		{ErrKubernetesAPI, ReasonKubernetesAPIError},
		{context.Canceled, ReasonFetchFailed},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestNewVaultSourceRejectsBadConfig(t *testing.T) {
	jwt := func(context.Context) (string, error) { return "x", nil }
	good := VaultConfig{
		Address: "https://vault.example:8200", Mount: "secret", Path: "redis/prod", Key: "password",
		Auth: VaultAuth{Kubernetes: &KubernetesAuth{Role: "redis", ServiceAccountToken: jwt}},
	}
	if _, err := NewVaultSource(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, mutate := range map[string]func(*VaultConfig){
		"no address":     func(c *VaultConfig) { c.Address = "" },
		"not a URL":      func(c *VaultConfig) { c.Address = "vault:8200" },
		"no mount":       func(c *VaultConfig) { c.Mount = "/" },
		"no path":        func(c *VaultConfig) { c.Path = "" },
		"no key":         func(c *VaultConfig) { c.Key = "" },
		"negative pin":   func(c *VaultConfig) { c.Version = -1 },
		"no auth":        func(c *VaultConfig) { c.Auth = VaultAuth{} },
		"two auths":      func(c *VaultConfig) { c.Auth.Token = jwt },
		"no role":        func(c *VaultConfig) { c.Auth.Kubernetes = &KubernetesAuth{ServiceAccountToken: jwt} },
		"no token func":  func(c *VaultConfig) { c.Auth.Kubernetes = &KubernetesAuth{Role: "r"} },
		"CA without PEM": func(c *VaultConfig) { c.CACert = []byte("not a certificate") },
		"plain http":     func(c *VaultConfig) { c.Address = "http://vault.example:8200" },
		"not allowed":    func(c *VaultConfig) { c.Addresses.Allowlist = []string{"https://vault.example/"} },
	} {
		cfg := good
		mutate(&cfg)
		_, err := NewVaultSource(cfg)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestVaultSourceIgnoresVaultEnvironment(t *testing.T) {
	t.Setenv("VAULT_TOKEN", "env-token")
	t.Setenv("VAULT_NAMESPACE", "env-ns")
	t.Setenv("VAULT_AGENT_ADDR", "http://127.0.0.9:1")
	s, err := NewVaultSource(VaultConfig{
		Address: "http://127.0.0.1:8200", Addresses: AddressPolicy{AllowInsecureHTTP: true}, Mount: "secret", Path: "p", Key: "k",
		Auth: VaultAuth{Token: func(context.Context) (string, error) { return "t", nil }},
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.client.Token() != "" || s.client.Namespace() != "" || s.client.Address() != "http://127.0.0.1:8200" {
		t.Fatalf("client took settings from the environment: token set %v, namespace %q, address %q",
			s.client.Token() != "", s.client.Namespace(), s.client.Address())
	}
}
