//go:build realvault

package credentials

// With the build tag realvault, the Vault tests run against a real Vault:
//
//	VAULT_ADDR=http://127.0.0.1:8200 VAULT_TOKEN=<a token allowed to manage
//	mounts, auth methods and policies> go test -tags realvault ./controllers/credentials/
//
// Each test enables its own KV v2 mount and Kubernetes auth mount under a
// random name and removes them afterwards, with its own policy. Vault must
// reach the test apiserver (it listens on 127.0.0.1) for TokenReview, so run
// Vault on the same machine. VAULT_CACERT and VAULT_NAMESPACE are honoured
// for the setup client.

import (
	"context"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"testing"

	"github.com/hashicorp/vault/api"
)

type vaultOptions struct{}

func newVault(t *testing.T, _ vaultOptions) *vaultTarget {
	t.Helper()
	if os.Getenv("VAULT_ADDR") == "" || os.Getenv("VAULT_TOKEN") == "" {
		t.Fatal("the realvault build tag needs VAULT_ADDR and VAULT_TOKEN")
	}
	root, err := api.NewClient(api.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := "redis-operator-test-" + randomName()
	if err := root.Sys().MountWithContext(ctx, name, &api.MountInput{Type: "kv", Options: map[string]string{"version": "2"}}); err != nil {
		t.Fatalf("enable KV v2 at %s: %v", name, err)
	}
	t.Cleanup(func() { _ = root.Sys().Unmount(name) })
	if err := root.Sys().EnableAuthWithOptionsWithContext(ctx, name, &api.EnableAuthOptions{Type: "kubernetes"}); err != nil {
		t.Fatalf("enable Kubernetes auth at %s: %v", name, err)
	}
	t.Cleanup(func() { _ = root.Sys().DisableAuth(name) })
	prefix := name + "-"
	t.Cleanup(func() {
		_ = root.Sys().DeletePolicy(prefix + "redis-read")
	})
	addr := root.Address()
	var caCert []byte
	if file := os.Getenv("VAULT_CACERT"); file != "" {
		if caCert, err = os.ReadFile(file); err != nil {
			t.Fatalf("VAULT_CACERT: %v", err)
		}
	}
	return &vaultTarget{
		caCert:    caCert,
		namespace: os.Getenv("VAULT_NAMESPACE"),
		addr:      addr,
		root:      root,
		kvMount:   name,
		authMount: name,
		prefix:    prefix,
		serverLog: func() string { return "" },
		interruptible: func(t *testing.T) (string, func()) {
			// A Vault we do not own cannot be stopped: put a proxy in front
			// of it and stop that instead.
			u, err := url.Parse(addr)
			if err != nil {
				t.Fatal(err)
			}
			proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(u))
			t.Cleanup(proxy.Close)
			return proxy.URL, func() { proxy.CloseClientConnections(); proxy.Close() }
		},
	}
}
