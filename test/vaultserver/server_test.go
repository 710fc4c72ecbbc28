package vaultserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
)

// start runs a server for one test and returns it with a root client.
func start(t *testing.T, opts Options) (*Server, *api.Client) {
	t.Helper()
	srv, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv, client(t, srv.Addr(), srv.RootToken())
}

func client(t *testing.T, addr, token string) *api.Client {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.Address = addr
	cfg.MaxRetries = 0
	c, err := api.NewClient(cfg)
	if err != nil {
		t.Fatalf("api.NewClient: %v", err)
	}
	c.SetToken(token)
	return c
}

func statusOf(err error) int {
	var re *api.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// childToken creates a token with the given policies through auth/token/create.
func childToken(t *testing.T, root *api.Client, policies ...string) string {
	t.Helper()
	sec, err := root.Auth().Token().Create(&api.TokenCreateRequest{Policies: policies, TTL: "1h"})
	if err != nil {
		t.Fatalf("token create: %v", err)
	}
	return sec.Auth.ClientToken
}

func TestKVv2VersionsThroughVaultAPI(t *testing.T) {
	ctx := context.Background()
	_, root := start(t, Options{})
	kv := root.KVv2("secret")
	for _, pw := range []string{"first", "second"} {
		if _, err := kv.Put(ctx, "redis/prod", map[string]any{"password": pw}); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
	latest, err := kv.Get(ctx, "redis/prod")
	if err != nil {
		t.Fatalf("get latest: %v", err)
	}
	if latest.Data["password"] != "second" || latest.VersionMetadata.Version != 2 {
		t.Fatalf("latest = %v version %d, want second version 2", latest.Data["password"], latest.VersionMetadata.Version)
	}
	v1, err := kv.GetVersion(ctx, "redis/prod", 1)
	if err != nil {
		t.Fatalf("get version 1: %v", err)
	}
	if v1.Data["password"] != "first" || v1.VersionMetadata.Version != 1 {
		t.Fatalf("version 1 = %v version %d, want first version 1", v1.Data["password"], v1.VersionMetadata.Version)
	}
	if _, err := kv.Get(ctx, "redis/missing"); !errors.Is(err, api.ErrSecretNotFound) {
		t.Fatalf("get missing: err = %v, want api.ErrSecretNotFound", err)
	}
	if err := kv.DeleteVersions(ctx, "redis/prod", []int{2}); err != nil {
		t.Fatalf("delete version 2: %v", err)
	}
	deleted, err := kv.GetVersion(ctx, "redis/prod", 2)
	if err != nil {
		t.Fatalf("get deleted version: %v", err)
	}
	if deleted.Data != nil || deleted.VersionMetadata.DeletionTime.IsZero() {
		t.Fatalf("deleted version: data %v, deletion time %v; want no data and a deletion time", deleted.Data, deleted.VersionMetadata.DeletionTime)
	}
	versions, err := kv.GetVersionsAsList(ctx, "redis/prod")
	if err != nil || len(versions) != 2 {
		t.Fatalf("versions = %v, %v; want 2 versions", versions, err)
	}
}

func TestPolicyGrantsReadOnItsPathsOnly(t *testing.T) {
	ctx := context.Background()
	srv, root := start(t, Options{})
	if _, err := root.KVv2("secret").Put(ctx, "redis/prod", map[string]any{"password": "p"}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.KVv2("secret").Put(ctx, "other/app", map[string]any{"password": "q"}); err != nil {
		t.Fatal(err)
	}
	err := root.Sys().PutPolicy("redis-read", `
path "secret/data/redis/*" {
  capabilities = ["read"]
}
path "secret/data/redis/denied" {
  capabilities = ["deny"]
}`)
	if err != nil {
		t.Fatalf("put policy: %v", err)
	}
	if got, err := root.Sys().GetPolicy("redis-read"); err != nil || !strings.Contains(got, "secret/data/redis/*") {
		t.Fatalf("get policy = %q, %v", got, err)
	}
	c := client(t, srv.Addr(), childToken(t, root, "redis-read"))
	kv := c.KVv2("secret")

	if s, err := kv.Get(ctx, "redis/prod"); err != nil || s.Data["password"] != "p" {
		t.Fatalf("read inside policy: %v, %v", s, err)
	}
	if _, err := kv.Get(ctx, "other/app"); statusOf(err) != http.StatusForbidden {
		t.Fatalf("read outside policy: err = %v, want 403", err)
	}
	if _, err := kv.Get(ctx, "redis/denied"); statusOf(err) != http.StatusForbidden {
		t.Fatalf("read of denied path: err = %v, want 403", err)
	}
	if _, err := kv.Put(ctx, "redis/prod", map[string]any{"password": "x"}); statusOf(err) != http.StatusForbidden {
		t.Fatalf("write with read grant: err = %v, want 403", err)
	}
	if _, err := c.Sys().ListMounts(); statusOf(err) != http.StatusForbidden {
		t.Fatalf("sys/mounts with non-root token: err = %v, want 403", err)
	}
	if err := root.Sys().PutPolicy("broken", `path "x" { capabilities = ["fly"] }`); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("policy with unknown capability: err = %v, want 400", err)
	}
}

func TestPolicyMatching(t *testing.T) {
	ps := newPolicyStore()
	for name, text := range map[string]string{
		"a": `path "secret/data/*" { capabilities = ["read"] }
		      path "secret/data/team/+/db" { capabilities = ["update"] }`,
		"b": `path "secret/data/*" { capabilities = ["list"] }
		      path "secret/data/locked" { capabilities = ["deny"] }`,
	} {
		p, err := parsePolicy(name, text)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		if err := ps.put(p); err != nil {
			t.Fatal(err)
		}
	}
	both := []string{"a", "b"}
	for _, tc := range []struct {
		policies   []string
		path, cap  string
		wantAccess bool
	}{
		{both, "secret/data/x", "read", true},
		{both, "secret/data/x", "list", true}, // same pattern in two policies: merged
		{[]string{"a"}, "secret/data/x", "list", false},
		{both, "secret/data/locked", "read", false},        // exact pattern wins, and it denies
		{both, "secret/data/team/blue/db", "update", true}, // "+" pattern wins over the earlier "*"
		{both, "secret/data/team/blue/db", "read", false},
		{both, "secret/metadata/x", "read", false},
		{[]string{"root"}, "anything/at/all", "delete", true},
		{[]string{"default"}, "secret/data/x", "read", false},
	} {
		if got := ps.allowed(tc.policies, tc.path, tc.cap); got != tc.wantAccess {
			t.Errorf("allowed(%v, %q, %q) = %v, want %v", tc.policies, tc.path, tc.cap, got, tc.wantAccess)
		}
	}
}

func TestTokenLifecycle(t *testing.T) {
	ctx := context.Background()
	srv, root := start(t, Options{})
	sec, err := root.Auth().Token().Create(&api.TokenCreateRequest{TTL: "1h", ExplicitMaxTTL: "90m", Policies: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Auth.LeaseDuration != 3600 || !sec.Auth.Renewable {
		t.Fatalf("created token: lease %d renewable %v, want 3600 and true", sec.Auth.LeaseDuration, sec.Auth.Renewable)
	}
	c := client(t, srv.Addr(), sec.Auth.ClientToken)

	renewed, err := c.Auth().Token().RenewSelfWithContext(ctx, 7200)
	if err != nil {
		t.Fatalf("renew-self: %v", err)
	}
	// The explicit max TTL of 90m, counted from creation, caps the 2h increment.
	if d := renewed.Auth.LeaseDuration; d > 90*60 || d < 89*60 {
		t.Fatalf("renewed lease = %ds, want capped near 5400s", d)
	}
	self, err := c.Auth().Token().LookupSelfWithContext(ctx)
	if err != nil {
		t.Fatalf("lookup-self: %v", err)
	}
	if self.Data["accessor"] != sec.Auth.Accessor || self.Data["last_renewal_time"] == nil {
		t.Fatalf("lookup-self = %v; want the same accessor and a renewal time", self.Data)
	}
	accessors, err := root.Logical().List("auth/token/accessors")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(toStrings(accessors.Data["keys"]), ","), sec.Auth.Accessor) {
		t.Fatalf("accessors %v lack %s", accessors.Data["keys"], sec.Auth.Accessor)
	}
	if err := c.Auth().Token().RevokeSelfWithContext(ctx, ""); err != nil {
		t.Fatalf("revoke-self: %v", err)
	}
	if _, err := c.Auth().Token().LookupSelfWithContext(ctx); statusOf(err) != http.StatusForbidden {
		t.Fatalf("lookup-self after revoke: err = %v, want 403", err)
	}
}

func TestShortTokenExpires(t *testing.T) {
	srv, root := start(t, Options{})
	sec, err := root.Auth().Token().Create(&api.TokenCreateRequest{TTL: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t, srv.Addr(), sec.Auth.ClientToken)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.Auth().Token().LookupSelf()
		if statusOf(err) == http.StatusForbidden {
			return
		}
		if err != nil {
			t.Fatalf("lookup-self: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("a 1s token was still valid after 10s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestMountsThroughSysAPI(t *testing.T) {
	ctx := context.Background()
	_, root := start(t, Options{NoDefaultMounts: true})
	if s, err := root.Logical().Read("secret/data/x"); s != nil || err != nil {
		t.Fatalf("read without mounts = %v, %v; want the 404 that api.Logical turns into nil, nil", s, err)
	}
	if err := root.Sys().Mount("kv-test", &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatalf("mount kv v2: %v", err)
	}
	if err := root.Sys().Mount("kv-test/nested", &api.MountInput{Type: "kv-v2"}); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("overlapping mount: err = %v, want 400", err)
	}
	if err := root.Sys().EnableAuthWithOptions("k8s-test", &api.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		t.Fatalf("enable kubernetes auth: %v", err)
	}
	mounts, err := root.Sys().ListMounts()
	if err != nil || mounts["kv-test/"] == nil || mounts["kv-test/"].Options["version"] != "2" {
		t.Fatalf("mounts = %v, %v; want kv-test/ with version 2", mounts, err)
	}
	auths, err := root.Sys().ListAuth()
	if err != nil || auths["k8s-test/"] == nil || auths["k8s-test/"].Type != "kubernetes" {
		t.Fatalf("auth mounts = %v, %v; want k8s-test/ of type kubernetes", auths, err)
	}
	if _, err := root.KVv2("kv-test").Put(ctx, "a", map[string]any{"k": "v"}); err != nil {
		t.Fatalf("put into new mount: %v", err)
	}
	// The login path is unauthenticated and reaches the real backend, which
	// refuses because it has no configuration yet.
	anon := client(t, root.Address(), "")
	_, err = anon.Logical().Write("auth/k8s-test/login", map[string]any{"role": "r", "jwt": "x.y.z"})
	if statusOf(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "role") {
		t.Fatalf("login without config: err = %v, want the backend's 400", err)
	}
	if err := root.Sys().Unmount("kv-test"); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	if s, err := root.Logical().Read("kv-test/data/a"); s != nil || err != nil {
		t.Fatalf("read after unmount = %v, %v; want 404 (nil, nil)", s, err)
	}
}

func TestNamespaceHeader(t *testing.T) {
	ctx := context.Background()
	srv, root := start(t, Options{Namespace: "team-a"})
	if _, err := root.KVv2("secret").Put(ctx, "x", map[string]any{"k": "v"}); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("request without namespace: err = %v, want 400", err)
	}
	c := client(t, srv.Addr(), srv.RootToken())
	c.SetNamespace("team-a")
	if _, err := c.KVv2("secret").Put(ctx, "x", map[string]any{"k": "v"}); err != nil {
		t.Fatalf("request with namespace: %v", err)
	}
}

func TestStartRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "10.0.0.1:8200", ":8200"} {
		if srv, err := Start(Options{Listen: addr}); err == nil {
			srv.Close()
			t.Errorf("Start(%q) succeeded, want an error", addr)
		}
	}
	// With TLS a private address passes the check (binding it is another
	// matter); unspecified and public ones still do not.
	cert, key, _ := writeTLSFiles(t, "127.0.0.1")
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", ":8200", "8.8.8.8:8200", "vault.example.com:8200"} {
		srv, err := Start(Options{Listen: addr, TLSCertFile: cert, TLSKeyFile: key})
		if err == nil {
			srv.Close()
			t.Errorf("Start(%q) with TLS succeeded, want an error", addr)
		} else if !strings.Contains(err.Error(), "neither a loopback nor a private") {
			t.Errorf("Start(%q) with TLS: %v, want the listen-address refusal", addr, err)
		}
	}
	for _, addr := range []string{"10.244.0.1:0", "172.16.0.1:0", "192.168.1.1:0", "[fd00::1]:0", "127.0.0.1:0", "localhost:0"} {
		if err := checkListen(addr, true); err != nil {
			t.Errorf("checkListen(%q, TLS): %v", addr, err)
		}
	}
}

func TestStartTLSOptions(t *testing.T) {
	cert, key, _ := writeTLSFiles(t, "127.0.0.1")
	for name, opts := range map[string]Options{
		"cert without key": {TLSCertFile: cert},
		"key without cert": {TLSKeyFile: key},
		"missing files":    {TLSCertFile: cert + ".absent", TLSKeyFile: key},
		"key as cert":      {TLSCertFile: key, TLSKeyFile: key},
	} {
		if srv, err := Start(opts); err == nil {
			srv.Close()
			t.Errorf("%s: Start succeeded, want an error", name)
		}
	}
}

// TestTLS serves HTTPS with a certificate of a throwaway CA: a client
// trusting that CA reads KV over it, one trusting only the system roots
// fails the handshake, and plain http to the port is refused.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	cert, key, caPEM := writeTLSFiles(t, "127.0.0.1")
	srv, err := Start(Options{TLSCertFile: cert, TLSKeyFile: key})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if !strings.HasPrefix(srv.Addr(), "https://127.0.0.1:") {
		t.Fatalf("Addr() = %q, want https://127.0.0.1:<port>", srv.Addr())
	}

	cfg := api.DefaultConfig()
	cfg.Address = srv.Addr()
	cfg.MaxRetries = 0
	if err := cfg.ConfigureTLS(&api.TLSConfig{CACertBytes: caPEM}); err != nil {
		t.Fatalf("ConfigureTLS: %v", err)
	}
	root, err := api.NewClient(cfg)
	if err != nil {
		t.Fatalf("api.NewClient: %v", err)
	}
	root.SetToken(srv.RootToken())
	if _, err := root.KVv2("secret").Put(ctx, "redis/tls", map[string]any{"password": "over-tls"}); err != nil {
		t.Fatalf("put over https: %v", err)
	}
	got, err := root.KVv2("secret").Get(ctx, "redis/tls")
	if err != nil {
		t.Fatalf("get over https: %v", err)
	}
	if got.Data["password"] != "over-tls" {
		t.Fatalf("read %v, want over-tls", got.Data["password"])
	}

	untrusting := client(t, srv.Addr(), srv.RootToken())
	var unknownCA x509.UnknownAuthorityError
	if _, err := untrusting.KVv2("secret").Get(ctx, "redis/tls"); !errors.As(err, &unknownCA) {
		t.Fatalf("get without the CA: err = %v, want x509.UnknownAuthorityError", err)
	}
	plain := client(t, "http://"+strings.TrimPrefix(srv.Addr(), "https://"), srv.RootToken())
	if _, err := plain.KVv2("secret").Get(ctx, "redis/tls"); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("plain http to the TLS port: err = %v, want 400", err)
	}
}

// writeTLSFiles makes a throwaway CA (ECDSA P-256, valid 1 h) and a serving
// certificate it signs for the IP addresses ips, writes the certificate
// and key as PEM files in t.TempDir, and returns their paths and the CA's
// PEM.
func writeTLSFiles(t *testing.T, ips ...string) (certFile, keyFile string, caPEM []byte) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "vaultserver test CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey := newKey()
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "vaultserver"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, ip := range ips {
		leafTmpl.IPAddresses = append(leafTmpl.IPAddresses, net.ParseIP(ip))
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
}

func toStrings(v any) []string {
	raw, _ := v.([]any)
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		s, _ := r.(string)
		out = append(out, s)
	}
	return out
}
