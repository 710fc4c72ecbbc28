//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/tlscerts"
)

// Names of the Vault side of TestRotationVault.
const (
	vaultAudience   = "vault"          // the role's audience and spec.auth.vault.audience
	vaultReviewerSA = "vault-reviewer" // bound to system:auth-delegator; its token reviews logins
	vaultLoginSA    = "redis-vault"    // spec.auth.vault.serviceAccountName
	vaultRole       = "redis-rotation"
	vaultPolicy     = "redis-read"
	vaultCASecret   = "vault-ca" // holds the test Vault's CA under vaultCAKey; spec.auth.vault.caSecretRef
	vaultCAKey      = "ca.crt"   // the operator's default key of caSecretRef, written out
)

// vaultCARef is the caSecretRef of a VaultSource pointing at the test
// Vault: the Secret startVaultForNamespace creates in the cluster's
// namespace.
func vaultCARef() *cachev1beta1.SecretKeySelector {
	return &cachev1beta1.SecretKeySelector{Name: vaultCASecret, Key: vaultCAKey}
}

// TestRotationVault (label rotation): the password comes from Vault KV v2
// and the operator logs in with the Kubernetes auth method. The Vault is
// test/vaultserver: Vault's own KV v2 and Kubernetes auth backends behind
// Vault's HTTP API, run as a process; its Kubernetes auth backend sends the
// operator's service-account token (TokenRequest API, audience "vault") to
// the local plane's TokenReview API. A 3×1 cluster starts on KV version 1;
// versions 2 and 3 are written under writes and the operator, polling every
// refreshInterval, rotates to each: status names the version, the rotation
// step clears, a client following the operator's Secret sees no failed
// authentication, replication stays up, no pod restarts, and no password
// shows in status, events or the operator's log. Then Vault stops:
// CredentialsReady=False/VaultUnreachable and Redis keeps serving with the
// last password.
func TestRotationVault(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	scenario(t, "rotation/vault-kv-twice-then-vault-down")
	const name = "rotation-vault"
	ctx := context.Background()
	ns := "e2e-" + name
	if err := ensureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	vault, stopVault, reviewerJWT := startVaultForNamespace(t, ns, "secret/data/redis/*")

	passwords := []string{"vrot0-" + randomToken(), "vrot1-" + randomToken(), "vrot2-" + randomToken()}
	kvPath := "redis/" + name
	putVersion := func(pw string) int {
		t.Helper()
		s, err := vault.KVv2("secret").Put(ctx, kvPath, map[string]any{"password": pw})
		if err != nil {
			t.Fatalf("writing secret/%s: %v", kvPath, err)
		}
		return s.VersionMetadata.Version
	}
	if v := putVersion(passwords[0]); v != 1 {
		t.Fatalf("first KV version is %d", v)
	}

	c := newCluster(t, name, func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth = &cachev1beta1.AuthSpec{
			RotationGracePeriod: &metav1.Duration{Duration: rotationGrace},
			Vault: &cachev1beta1.VaultSource{
				Address:            vault.Address(), // https on the plane's gateway (startVault)
				CASecretRef:        vaultCARef(),
				Mount:              "secret",
				Path:               kvPath,
				Key:                "password",
				Role:               vaultRole,
				AuthMount:          "kubernetes",
				Audience:           vaultAudience,
				ServiceAccountName: vaultLoginSA,
				RefreshInterval:    &metav1.Duration{Duration: 10 * time.Second},
			},
		}
	})
	rc := c.waitReady(5 * time.Minute)
	checkVaultCredentials(t, rc, 1)
	if c.password() != passwords[0] {
		t.Fatal("the operator's Secret does not hold KV version 1")
	}
	checkKubernetesLogin(t, vault, ns)
	pods := map[string]podRun{}
	for _, p := range c.pods() {
		pods[p.Name] = runOf(p)
	}
	fw := startFollowingWriter(t, c)
	fw.waitWrites(50, time.Minute)

	for round := 1; round <= 2; round++ {
		old, next := passwords[round-1], passwords[round]
		version := putVersion(next)
		if version != round+1 {
			t.Fatalf("round %d: KV version %d, want %d", round, version, round+1)
		}

		// Found by the operator's poll (no refresh annotation).
		c.poll(fmt.Sprintf("round %d: Secret switched", round), 2*time.Minute, func() (bool, string) {
			return c.password() == next, "the operator's Secret still holds the old password"
		})
		for _, p := range c.pods() {
			for _, pw := range []string{next, old} {
				if err := pingWith(p.Status.PodIP, pw); err != nil {
					t.Fatalf("round %d: %s in the grace period refuses a password: %v", round, p.Name, err)
				}
			}
		}
		wantVersion := fmt.Sprintf("#v%d", version)
		c.poll(fmt.Sprintf("round %d: rotation to KV version %d finished", round, version), 3*time.Minute, func() (bool, string) {
			cr := c.get().Status.Credentials
			return cr != nil && cr.RotationStep == "" && strings.HasSuffix(cr.Version, wantVersion) && cr.LastRotationTime != nil,
				fmt.Sprintf("credentials %+v", cr)
		})
		for _, p := range c.pods() {
			if err := pingWith(p.Status.PodIP, next); err != nil {
				t.Fatalf("round %d: %s refuses the new password: %v", round, p.Name, err)
			}
			if err := pingWith(p.Status.PodIP, old); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
				t.Fatalf("round %d: %s after the grace period, old password: %v", round, p.Name, err)
			}
		}
		rc = c.waitReady(2 * time.Minute)
		checkVaultCredentials(t, rc, version)
		c.checkConverged(rc)
		checkLinksUp(t, c, next)
	}

	for _, p := range c.pods() {
		if was, ok := pods[p.Name]; !ok || was != runOf(p) {
			t.Fatalf("pod %s restarted during the rotations (%+v, now %+v)", p.Name, was, runOf(p))
		}
	}
	res := fw.stop()
	if res.authFailures != 0 || res.writes == 0 {
		t.Fatalf("client following the Secret: %d writes, %d failed authentications (%s)", res.writes, res.authFailures, res.lastAuthErr)
	}
	t.Logf("client following the Secret: %d writes, 0 failed authentications, %d other errors", res.writes, res.otherFailures)

	// Vault goes away: the last good password keeps serving.
	stopVault()
	c.poll("CredentialsReady=False/VaultUnreachable", 2*time.Minute, func() (bool, string) {
		cond := meta.FindStatusCondition(c.get().Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)
		return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == cachev1beta1.RedisClusterVaultUnreachableReason, fmt.Sprintf("%+v", cond)
	})
	live := passwords[2]
	for _, p := range c.pods() {
		if err := pingWith(p.Status.PodIP, live); err != nil {
			t.Fatalf("%s with the last good password while Vault is down: %v", p.Name, err)
		}
	}
	if c.password() != live {
		t.Fatal("the operator's Secret changed while Vault is down")
	}
	for _, p := range c.pods() {
		if was := pods[p.Name]; was != runOf(p) {
			t.Fatalf("pod %s restarted while Vault is down (%+v, now %+v)", p.Name, was, runOf(p))
		}
	}

	// No password in status, events or the operator's log.
	logText := c.checkSecretsHidden(append(passwords, reviewerJWT, vault.Token()))
	if !strings.Contains(logText, "Password rotation finished") {
		t.Fatal("the operator's log has no rotation line: was the right log searched?")
	}
}

// checkVaultCredentials checks that rc reads its password from Vault,
// KV version version, with CredentialsReady=True and no rotation under way.
func checkVaultCredentials(t *testing.T, rc *cachev1beta1.RedisCluster, version int) {
	t.Helper()
	cond := meta.FindStatusCondition(rc.Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)
	if cond == nil || cond.Status != metav1.ConditionTrue {
		t.Fatalf("CredentialsReady: %+v", cond)
	}
	cr := rc.Status.Credentials
	if cr == nil || cr.Source != "Vault" || !strings.HasSuffix(cr.Version, fmt.Sprintf("#v%d", version)) || cr.RotationStep != "" {
		t.Fatalf("status.credentials %+v, want source Vault at KV version %d with no rotation step", cr, version)
	}
}

// checkKubernetesLogin checks, through Vault's token store, that the
// operator holds a token issued by auth/kubernetes/login for the login
// service account of ns under vaultRole, with the read policy: the
// password was read through the Kubernetes auth method.
func checkKubernetesLogin(t *testing.T, vault *api.Client, ns string) {
	t.Helper()
	list, err := vault.Logical().List("auth/token/accessors")
	if err != nil || list == nil {
		t.Fatalf("listing Vault token accessors: %v", err)
	}
	keys, _ := list.Data["keys"].([]any)
	var seen []string
	for _, k := range keys {
		acc, _ := k.(string)
		info, err := vault.Logical().Write("auth/token/lookup-accessor", map[string]any{"accessor": acc})
		if err != nil || info == nil {
			continue // revoked or expired in between
		}
		meta, _ := info.Data["meta"].(map[string]any)
		seen = append(seen, fmt.Sprintf("%v %v %v", info.Data["path"], meta, info.Data["policies"]))
		policies := fmt.Sprint(info.Data["policies"])
		if info.Data["path"] == "auth/kubernetes/login" && meta["role"] == vaultRole &&
			meta["service_account_name"] == vaultLoginSA && meta["service_account_namespace"] == ns &&
			strings.Contains(policies, vaultPolicy) {
			return
		}
	}
	t.Fatalf("no Vault token from auth/kubernetes/login for %s/%s as role %s; tokens: %v", ns, vaultLoginSA, vaultRole, seen)
}

// startVault builds test/vaultserver's command into bin/ (unless
// E2E_REUSE_BIN=1 and it is there) and runs it over HTTPS on a free port of
// the plane's gateway address (vaultHost), its output in the plane's log
// directory (a file per test): the operator reaches it there whether it
// runs on the host or as a pod, without --vault-allow-insecure-http. The
// serving certificate is from a throwaway CA (vaultTLS). It returns a root
// client that trusts that CA, the CA's PEM (for the Secret that
// spec.auth.vault.caSecretRef names) and a function that stops the server
// (also run when t ends).
func startVault(t *testing.T) (cl *api.Client, caPEM []byte, stop func()) {
	t.Helper()
	bin := filepath.Join(env.binDir, "vaultserver")
	if _, err := os.Stat(bin); err != nil || os.Getenv("E2E_REUSE_BIN") != "1" {
		if err := build(env.root, "-C", filepath.Join(env.root, "test", "vaultserver"), "build", "-o", bin, "./cmd/vaultserver"); err != nil {
			t.Fatal(err)
		}
	}
	host := planeGateway(t) // pods reach it, as suiteStore
	certFile, keyFile, caPEM := vaultTLS(t, host)
	// A log of this test's own (scenarios that start a Vault run side by
	// side): the address and root token are read from it.
	logPath := filepath.Join(env.stateDir, "logs", "vaultserver-"+strings.ReplaceAll(t.Name(), "/", "_")+".log")
	if err := os.Remove(logPath); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	p, err := startProcess(logPath, bin, "--listen", net.JoinHostPort(host, "0"),
		"--tls-cert-file", certFile, "--tls-key-file", keyFile)
	if err != nil {
		t.Fatal(err)
	}
	stop = func() { p.stop(10 * time.Second) }
	t.Cleanup(stop)

	var addr, token string
	deadline := time.Now().Add(time.Minute)
	for addr == "" || token == "" {
		if p.exited() || time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("vaultserver printed no address and root token (exited %v: %v):\n%s", p.exited(), p.err, tail(b, 20))
		}
		time.Sleep(100 * time.Millisecond)
		f, err := os.Open(logPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VAULT_ADDR="); ok {
				addr = v
			}
			if v, ok := strings.CutPrefix(sc.Text(), "VAULT_TOKEN="); ok {
				token = v
			}
		}
		_ = f.Close()
	}
	if !strings.HasPrefix(addr, "https://") {
		t.Fatalf("vaultserver serves %s, want https (is %s an old build? unset E2E_REUSE_BIN)", addr, bin)
	}
	cfg := api.DefaultConfig()
	cfg.Address = addr
	cfg.MaxRetries = 0
	if err := cfg.ConfigureTLS(&api.TLSConfig{CACertBytes: caPEM}); err != nil {
		t.Fatal(err)
	}
	cl, err = api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl.SetToken(token)
	if _, err := cl.Sys().Health(); err != nil {
		t.Fatalf("vaultserver health: %v", err)
	}
	return cl, caPEM, stop
}

// vaultTLS makes a throwaway CA and a serving certificate it signs for the
// test Vault (controllers/tlscerts: ECDSA P-256, the leaf valid for
// tlscerts.LeafValidity; IP SANs host and 127.0.0.1), writes the
// certificate and its key as PEM files in t.TempDir, and returns their
// paths and the CA certificate's PEM. The CA's key is dropped: it signs
// nothing else.
func vaultTLS(t *testing.T, host string) (certFile, keyFile string, caPEM []byte) {
	t.Helper()
	now := time.Now()
	caPEM, caKey, err := tlscerts.NewCA("e2e test Vault CA "+t.Name(), now, tlscerts.DefaultCAValidity)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := tlscerts.Issue(caPEM, caKey, nil, []net.IP{net.ParseIP(host), net.IPv4(127, 0, 0, 1)}, now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "vault.crt"), filepath.Join(dir, "vault.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, caPEM
}

// vaultReviewer creates the service account whose token the Kubernetes
// auth backend presents to the TokenReview API, bound to
// system:auth-delegator, and returns a token of it (apiserver audience).
func vaultReviewer(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	createServiceAccount(t, ns, vaultReviewerSA)
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: vaultReviewerSA + "-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: vaultReviewerSA}},
	}
	if err := env.k8s.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("binding %s to system:auth-delegator: %v", vaultReviewerSA, err)
	}
	t.Cleanup(func() { _ = env.k8s.Delete(context.Background(), crb) })
	expiry := int64(3600)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vaultReviewerSA}}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}
	if err := env.k8s.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatalf("token for %s: %v", vaultReviewerSA, err)
	}
	return tr.Status.Token
}

// vaultCASecretIn creates (or, left by an earlier run, updates) the Secret
// vaultCASecret of ns with caPEM under vaultCAKey, and deletes it when t
// ends.
func vaultCASecretIn(t *testing.T, ns string, caPEM []byte) {
	t.Helper()
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vaultCASecret},
		Data: map[string][]byte{vaultCAKey: caPEM}}
	err := env.k8s.Create(ctx, sec)
	if apierrors.IsAlreadyExists(err) {
		old := &corev1.Secret{}
		if err = env.k8s.Get(ctx, client.ObjectKeyFromObject(sec), old); err == nil {
			old.Data = sec.Data
			err = env.k8s.Update(ctx, old)
		}
	}
	if err != nil {
		t.Fatalf("Secret %s/%s with the Vault CA: %v", ns, vaultCASecret, err)
	}
	t.Cleanup(func() { _ = env.k8s.Delete(context.Background(), sec) })
}

func createServiceAccount(t *testing.T, ns, name string) {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.k8s.Create(context.Background(), sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating service account %s/%s: %v", ns, name, err)
	}
	t.Cleanup(func() { _ = env.k8s.Delete(context.Background(), sa) })
}

func vaultWrite(t *testing.T, cl *api.Client, path string, data map[string]any) {
	t.Helper()
	if _, err := cl.Logical().Write(path, data); err != nil {
		t.Fatalf("vault write %s: %v", path, err)
	}
}

// startVaultForNamespace starts the test Vault (startVault) set up for a
// cluster of namespace ns: the Kubernetes auth method reviews tokens with
// the plane's API server, policy vaultPolicy grants read on policyPath
// (e.g. "secret/data/redis/*"), role vaultRole binds the ServiceAccount
// vaultLoginSA of ns (created here) with audience vaultAudience, and the
// Secret vaultCASecret of ns (created here) holds the Vault's CA under
// vaultCAKey, for a VaultSource's CASecretRef (vaultCARef) with Address
// vault.Address(). It returns the reviewer's token too, for the checks that
// it leaks nowhere.
func startVaultForNamespace(t *testing.T, ns, policyPath string) (vault *api.Client, stop func(), reviewerJWT string) {
	t.Helper()
	var caPEM []byte
	vault, caPEM, stop = startVault(t)
	vaultCASecretIn(t, ns, caPEM)
	reviewerJWT = vaultReviewer(t, ns)
	createServiceAccount(t, ns, vaultLoginSA)
	vaultWrite(t, vault, "auth/kubernetes/config", map[string]any{
		"kubernetes_host":      env.cfg.Host,
		"kubernetes_ca_cert":   string(env.cfg.CAData),
		"token_reviewer_jwt":   reviewerJWT,
		"disable_local_ca_jwt": true,
	})
	if err := vault.Sys().PutPolicy(vaultPolicy, `path "`+policyPath+`" { capabilities = ["read"] }`); err != nil {
		t.Fatalf("writing policy %s: %v", vaultPolicy, err)
	}
	vaultWrite(t, vault, "auth/kubernetes/role/"+vaultRole, map[string]any{
		"bound_service_account_names":      vaultLoginSA,
		"bound_service_account_namespaces": ns,
		"audience":                         vaultAudience,
		"token_policies":                   vaultPolicy,
		"token_ttl":                        "1h",
	})
	return vault, stop, reviewerJWT
}
