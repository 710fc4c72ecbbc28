package backup

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/test/s3test"
)

// startVault runs bin/vaultserver (test/vaultserver: Vault's own KV v2 and
// Kubernetes auth backends behind Vault's HTTP API) on 127.0.0.1 with
// Kubernetes auth reviewing tokens against cfg's API server, a policy
// reading secret/data/s3*, and role "backup" bound to service account
// namespace/serviceAccount with audience vault. It returns the address
// and a root client.
func startVault(t *testing.T, cfg *rest.Config, namespace, serviceAccount string) (string, *api.Client) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "vaultserver"))
	if err != nil {
		t.Fatal(err)
	}
	root := "root-" + rand.Text()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "VAULT_DEV_ROOT_TOKEN_ID="+root)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s (make tools builds it): %v", bin, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "VAULT_ADDR="); ok {
				addrs <- a
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrs:
	case <-time.After(60 * time.Second):
		t.Fatal("vaultserver printed no VAULT_ADDR within 60 s")
	}
	vc := api.DefaultConfig()
	vc.Address = addr
	c, err := api.NewClient(vc)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(root)

	ctx := context.Background()
	kc := kubernetes.NewForConfigOrDie(cfg)
	for _, sa := range []string{serviceAccount, "vault-reviewer"} {
		if _, err := kc.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "vault-reviewer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: namespace, Name: "vault-reviewer"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := kc.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "vault-reviewer",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string]map[string]any{
		"auth/kubernetes/config": {"kubernetes_host": cfg.Host, "kubernetes_ca_cert": string(cfg.CAData),
			"token_reviewer_jwt": tr.Status.Token, "disable_local_ca_jwt": true},
		"auth/kubernetes/role/backup": {"bound_service_account_names": serviceAccount, "bound_service_account_namespaces": namespace,
			"audience": "vault", "token_policies": "s3-read", "token_ttl": "1h"},
	} {
		if path == "auth/kubernetes/role/backup" {
			if err := c.Sys().PutPolicy("s3-read", `path "secret/data/s3*" { capabilities = ["read"] }`); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Logical().Write(path, data); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
	}
	return addr, c
}

// TestObjectStoreFromVault: an object store's key pair read from Vault KV
// v2 with Kubernetes auth as the backed-up cluster's service account
// (the builder spec.auth.vault uses), against the test Vault and
// SeaweedFS: the right pair reaches the bucket, a wrong one is refused by
// the store (AccessDenied), a missing field and an unbound service
// account are named by the Vault reasons.
func TestObjectStoreFromVault(t *testing.T) {
	k8s, cfg := startAPIServerConfig(t)
	ctx := context.Background()
	srv := s3test.Start(t)
	srv.MakeBucket(t, "vault")
	addr, root := startVault(t, cfg, "default", "demo")
	for path, data := range map[string]map[string]any{
		"s3":       {"accessKeyID": s3test.AccessKey, "secretAccessKey": s3test.SecretKey},
		"s3-wrong": {"accessKeyID": s3test.AccessKey, "secretAccessKey": "wrong"},
		"s3-half":  {"accessKeyID": s3test.AccessKey},
	} {
		if _, err := root.KVv2("secret").Put(ctx, path, data); err != nil {
			t.Fatal(err)
		}
	}
	vk, err := NewVaultKeys(cfg, credentials.AddressPolicy{AllowInsecureHTTP: true}, 5*time.Second, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	spec := func(path, sa string) *cachev1beta1.ObjectStoreSpec {
		return &cachev1beta1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: "vault", ForcePathStyle: true,
			CredentialsVault: &cachev1beta1.ObjectStoreVaultCredentials{Vault: cachev1beta1.VaultSource{
				Address: addr, Path: path, Role: "backup", ServiceAccountName: sa}}}
	}
	check := func(path, sa string) (string, error) {
		store, reason, err := OpenStoreVault(ctx, k8s, EndpointPolicy{}, vk, "default", "demo", spec(path, sa))
		if err != nil {
			return reason, err
		}
		err = store.Check(ctx)
		return Reason(err), err
	}
	if reason, err := check("s3", ""); err != nil {
		t.Fatalf("the right pair: %s %v", reason, err)
	}
	if reason, err := check("s3-wrong", ""); !errors.Is(err, ErrAccessDenied) || reason != cachev1beta1.BackupAccessDeniedReason {
		t.Fatalf("a wrong pair: %s %v", reason, err)
	}
	if reason, err := check("s3-half", ""); reason != credentials.ReasonKeyMissing || !strings.Contains(err.Error(), "secretAccessKey") {
		t.Fatalf("a missing field: %s %v", reason, err)
	}
	if _, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ServiceAccounts("default").Create(ctx,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if reason, err := check("s3", "other"); reason != credentials.ReasonAuthenticationFailed {
		t.Fatalf("a service account the role does not bind: %s %v", reason, err)
	}
	if _, reason, err := OpenStore(ctx, k8s, EndpointPolicy{}, "default", spec("s3", "")); err == nil || reason != credentials.ReasonInvalidConfig {
		t.Fatalf("without Vault access: %s %v", reason, err)
	}
}
