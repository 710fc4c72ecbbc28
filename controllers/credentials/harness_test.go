package credentials

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The end-to-end tests run against a real kube-apiserver and etcd (envtest,
// binaries from `make tools` in bin/, or KUBEBUILDER_ASSETS) and a Vault
// made of Vault's own KV v2 and Kubernetes auth backends (test/vaultserver,
// built into a temporary directory on first use), or, with the build tag
// realvault, any Vault given by VAULT_ADDR and VAULT_TOKEN.

var (
	kubeOnce   sync.Once
	kubeEnv    *envtest.Environment
	kubeConfig *rest.Config
	kubeErr    error

	tmpDir string
)

func TestMain(m *testing.M) {
	var err error
	tmpDir, err = os.MkdirTemp("", "credentials-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if kubeEnv != nil {
		if err := kubeEnv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
	os.RemoveAll(tmpDir)
	os.Exit(code)
}

// kube starts the control plane on first use and returns a client for it.
func kube(t *testing.T) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	kubeOnce.Do(func() {
		if os.Getenv("KUBEBUILDER_ASSETS") == "" {
			bin, err := filepath.Abs("../../bin")
			if err != nil {
				kubeErr = err
				return
			}
			os.Setenv("KUBEBUILDER_ASSETS", bin)
		}
		apiserver := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-apiserver")
		if _, err := os.Stat(apiserver); err != nil {
			kubeErr = fmt.Errorf("no kube-apiserver at %s (run `make tools`, or set KUBEBUILDER_ASSETS): %w", apiserver, err)
			return
		}
		kubeEnv = &envtest.Environment{}
		kubeConfig, kubeErr = kubeEnv.Start()
	})
	if kubeErr != nil {
		t.Fatalf("starting envtest: %v", kubeErr)
	}
	return kubernetes.NewForConfigOrDie(kubeConfig), kubeConfig
}

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T, kc kubernetes.Interface) string {
	t.Helper()
	ns, err := kc.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "credentials-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = kc.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

func serviceAccount(t *testing.T, kc kubernetes.Interface, ns, name string) {
	t.Helper()
	_, err := kc.CoreV1().ServiceAccounts(ns).Create(context.Background(), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create service account %s/%s: %v", ns, name, err)
	}
}

// vaultTarget is a Vault under test with fresh mounts and a root client.
type vaultTarget struct {
	addr      string
	root      *api.Client
	kvMount   string // KV v2 mount path, e.g. "secret"
	authMount string // Kubernetes auth mount path without "auth/", e.g. "kubernetes"
	prefix    string // prefix for policy and role names, unique per test on a shared Vault
	caCert    []byte // PEM to verify the Vault's TLS certificate with, if it has one
	namespace string // Vault Enterprise namespace the sources must send
	// serverLog returns what the server logged so far ("" for an external Vault).
	serverLog func() string
	// interruptible returns an address of this Vault and a function after
	// which that address no longer answers (Vault down).
	interruptible func(t *testing.T) (string, func())
}

// fixture is a Vault whose Kubernetes auth reviews tokens with the test
// apiserver, a namespace with the ServiceAccount "redis-operator", and a
// Vault role for it that reads <kv>/data/redis/*.
type fixture struct {
	vault *vaultTarget
	kube  kubernetes.Interface
	cfg   *rest.Config
	ns    string
	role  string
}

const (
	operatorSA = "redis-operator"
	audience   = "vault"
)

func newFixture(t *testing.T, opts vaultOptions) *fixture {
	t.Helper()
	ctx := context.Background()
	kc, cfg := kube(t)
	ns := namespace(t, kc)
	serviceAccount(t, kc, ns, operatorSA)
	serviceAccount(t, kc, ns, "vault-reviewer")
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vault-reviewer-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "vault-reviewer"}},
	}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("bind vault-reviewer to system:auth-delegator: %v", err)
	}
	t.Cleanup(func() {
		_ = kc.RbacV1().ClusterRoleBindings().Delete(context.Background(), crb.Name, metav1.DeleteOptions{})
	})
	// The reviewer token carries the apiserver's own audience, as a token
	// reviewer JWT does in a cluster.
	expiry := int64(3600)
	tr, err := kc.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "vault-reviewer", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for vault-reviewer: %v", err)
	}

	v := newVault(t, opts)
	write(t, v.root, "auth/"+v.authMount+"/config", map[string]any{
		"kubernetes_host":      cfg.Host,
		"kubernetes_ca_cert":   string(cfg.CAData),
		"token_reviewer_jwt":   tr.Status.Token,
		"disable_local_ca_jwt": true,
	})
	policy := v.prefix + "redis-read"
	if err := v.root.Sys().PutPolicy(policy, fmt.Sprintf(`path "%s/data/redis/*" { capabilities = ["read"] }`, v.kvMount)); err != nil {
		t.Fatalf("put policy: %v", err)
	}
	role := v.prefix + "redis"
	write(t, v.root, "auth/"+v.authMount+"/role/"+role, map[string]any{
		"bound_service_account_names":      operatorSA,
		"bound_service_account_namespaces": ns,
		"audience":                         audience,
		"token_policies":                   policy,
		"token_ttl":                        "1h",
		"token_max_ttl":                    "4h",
	})
	return &fixture{vault: v, kube: kc, cfg: cfg, ns: ns, role: role}
}

func write(t *testing.T, c *api.Client, path string, data map[string]any) {
	t.Helper()
	if _, err := c.Logical().Write(path, data); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// putPassword writes a new KV v2 version of redis/<name> and returns its number.
func (f *fixture) putPassword(t *testing.T, name string, data map[string]any) int {
	t.Helper()
	s, err := f.vault.root.KVv2(f.vault.kvMount).Put(context.Background(), "redis/"+name, data)
	if err != nil {
		t.Fatalf("put redis/%s: %v", name, err)
	}
	return s.VersionMetadata.Version
}

// config is a VaultConfig for redis/<name> with Kubernetes auth as the
// fixture's ServiceAccount. It allows plain http: the local test Vault
// listens on http://127.0.0.1.
func (f *fixture) config(name string) VaultConfig {
	return VaultConfig{
		Address:   f.vault.addr,
		Addresses: AddressPolicy{AllowInsecureHTTP: true},
		CACert:    f.vault.caCert,
		Namespace: f.vault.namespace,
		Mount:     f.vault.kvMount,
		Path:      "redis/" + name,
		Key:       "password",
		Auth: VaultAuth{Kubernetes: &KubernetesAuth{
			Role:                f.role,
			MountPath:           f.vault.authMount,
			ServiceAccountToken: ServiceAccountToken(f.kube, f.ns, operatorSA, audience, 0),
		}},
	}
}

func mustSource(t *testing.T, cfg VaultConfig) *VaultSource {
	t.Helper()
	s, err := NewVaultSource(cfg)
	if err != nil {
		t.Fatalf("NewVaultSource: %v", err)
	}
	return s
}

// loginTokens lists the accessors of live tokens issued by the fixture's
// Kubernetes auth mount, through the token store's own API.
func (f *fixture) loginTokens(t *testing.T) map[string]map[string]any {
	t.Helper()
	list, err := f.vault.root.Logical().List("auth/token/accessors")
	if err != nil {
		t.Fatalf("list accessors: %v", err)
	}
	out := map[string]map[string]any{}
	if list == nil {
		return out
	}
	keys, _ := list.Data["keys"].([]any)
	for _, k := range keys {
		acc, _ := k.(string)
		info, err := f.vault.root.Logical().Write("auth/token/lookup-accessor", map[string]any{"accessor": acc})
		if err != nil {
			continue // revoked or expired in between
		}
		if info.Data["path"] == "auth/"+f.vault.authMount+"/login" {
			out[acc] = info.Data
		}
	}
	return out
}

func keysOf(m map[string]map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// fakeClock is a settable clock for token-renewal decisions.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// randomName is a short lowercase random name.
func randomName() string { return strings.ToLower(rand.Text()[:10]) }
