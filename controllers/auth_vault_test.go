package controllers

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
)

// unreachableVault is an https address where nothing listens (port 1).
const unreachableVault = "https://127.0.0.1:1"

// hostile is a Vault impostor (HTTPS on 127.0.0.1) that accepts every
// Kubernetes login and then echoes the tokens it was sent in its error
// answers, or answers reads with data that must stay in Vault. It starts
// with the suite, whose operator allowlists it (suiteVaultAddresses).
var hostile = newHostileVault()

// suiteVaultAddresses is the suite operator's Vault address policy: https
// only, to the hostile impostor and to unreachableVault.
func suiteVaultAddresses() credentials.AddressPolicy {
	return credentials.AddressPolicy{Allowlist: []string{hostile.server.URL + "/", unreachableVault + "/"}}
}

type hostileVault struct {
	server *httptest.Server
	// clientToken is the Vault token every login gets.
	clientToken string
	// responseValue is the value of the KV data it answers reads with
	// (under a key other than the one asked for) once echo is false.
	responseValue string

	mu   sync.Mutex
	jwts []string // the service-account tokens logins sent
	echo bool     // reads fail with an error echoing the tokens
}

func newHostileVault() *hostileVault {
	h := &hostileVault{clientToken: "hvs.hostile-client-token-5e1f", responseValue: "vault-response-value-9a0c", echo: true}
	h.server = httptest.NewTLSServer(http.HandlerFunc(h.serve))
	return h
}

func (h *hostileVault) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPut || r.Method == http.MethodPost:
		var login struct {
			JWT string `json:"jwt"`
		}
		_ = json.NewDecoder(r.Body).Decode(&login)
		h.jwts = append(h.jwts, login.JWT)
		_ = json.NewEncoder(w).Encode(map[string]any{"auth": map[string]any{
			"client_token": h.clientToken, "accessor": "acc", "lease_duration": 3600, "renewable": true, "policies": []string{"default"},
		}})
	case h.echo:
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []string{
			fmt.Sprintf("request with token %s and login %s refused", r.Header.Get("X-Vault-Token"), strings.Join(h.jwts, ",")),
		}})
	default:
		_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{
			"data":     map[string]any{"not-the-password": h.responseValue},
			"metadata": map[string]any{"version": 3, "created_time": "2026-01-01T00:00:00Z", "deletion_time": "", "destroyed": false},
		}})
	}
}

// secrets lists what must never show: the Vault token, the response
// value, and every JWT the logins sent with, separately, each JWT's
// payload (a cut-off JWT still shows it).
func (h *hostileVault) secrets() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []string{h.clientToken, h.responseValue}
	for _, jwt := range h.jwts {
		out = append(out, jwt)
		if parts := strings.Split(jwt, "."); len(parts) == 3 {
			out = append(out, parts[1])
		}
	}
	return out
}

func (h *hostileVault) setEcho(echo bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.echo = echo
}

// waitCredentialsFalse waits for CredentialsReady=False with reason.
func waitCredentialsFalse(t *testing.T, rc *cachev1beta1.RedisCluster, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	eventually(t, "CredentialsReady=False/"+reason, func() error {
		c = meta.FindStatusCondition(getCluster(t, rc).Status.Conditions, cachev1beta1.RedisClusterCredentialsReadyCondition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason {
			return fmt.Errorf("credentials %+v", c)
		}
		return nil
	})
	return c
}

// TestAuthVaultAddressRefused: a plain http address, and an https address
// outside the operator's allowlist, give CredentialsReady=False/InvalidSpec
// naming the flag to change, and nothing connects to them.
func TestAuthVaultAddressRefused(t *testing.T) {
	ns := newNamespace(t)
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
	tok := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vault-token", Namespace: ns}, Data: map[string][]byte{"token": []byte("hvs.never-sent")}}
	if err := k8s.Create(testCtx, tok); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ address, flag string }{
		"plain-http":  {"http://" + l.Addr().String(), "--" + credentials.InsecureHTTPFlag},
		"not-allowed": {"https://" + l.Addr().String(), "--" + credentials.AllowlistFlag},
	} {
		rc := newCluster(t, ns, name, func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Auth = &cachev1beta1.AuthSpec{Vault: &cachev1beta1.VaultSource{
				Address: tc.address, Path: "redis/test",
				TokenSecretRef: &cachev1beta1.SecretKeySelector{Name: tok.Name, Key: "token"},
			}}
		})
		c := waitCredentialsFalse(t, rc, cachev1beta1.RedisClusterInvalidSpecReason)
		if !strings.Contains(c.Message, tc.address) || !strings.Contains(c.Message, tc.flag) {
			t.Errorf("%s: message %q does not name the address and %s", name, c.Message, tc.flag)
		}
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connections to refused Vault addresses", n)
	}
}

// TestAuthVaultSecretsNeverShown: a Vault that echoes the tokens it was
// sent (the login's service-account JWT, the Vault token) in its error
// answer, and then answers with data under other keys, makes the operator
// report both failures, but neither token nor the data shows in status,
// events or the operator's log.
func TestAuthVaultSecretsNeverShown(t *testing.T) {
	ns := newNamespace(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "vault-login", Namespace: ns}}
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vault-ca", Namespace: ns}, Data: map[string][]byte{
		"ca.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hostile.server.Certificate().Raw}),
	}}
	for _, obj := range []client.Object{sa, ca} {
		if err := k8s.Create(testCtx, obj); err != nil {
			t.Fatal(err)
		}
	}
	logStart := operatorLog.Len()
	rc := newCluster(t, ns, "hostile", func(rc *cachev1beta1.RedisCluster) {
		rc.Spec.Auth = &cachev1beta1.AuthSpec{Vault: &cachev1beta1.VaultSource{
			Address: hostile.server.URL, Path: "redis/test", Role: "redis", ServiceAccountName: sa.Name,
			CASecretRef: &cachev1beta1.SecretKeySelector{Name: ca.Name, Key: "ca.crt"},
		}}
	})
	echoed := waitCredentialsFalse(t, rc, cachev1beta1.RedisClusterVaultUnreachableReason)
	if !strings.Contains(echoed.Message, "Vault answered 400: request with token [redacted] and login [redacted] refused") {
		t.Errorf("the echoing answer is not reported, redacted: %q", echoed.Message)
	}

	hostile.setEcho(false)
	updateSpec(t, rc, func(got *cachev1beta1.RedisCluster) {
		if got.Annotations == nil {
			got.Annotations = map[string]string{}
		}
		got.Annotations[cachev1beta1.RefreshCredentialsAnnotation] = "1"
	})
	waitCredentialsFalse(t, rc, cachev1beta1.RedisClusterSecretNotFoundReason)

	secrets := hostile.secrets()
	if len(secrets) < 3 {
		t.Fatalf("the impostor saw no login: %d secrets to look for", len(secrets))
	}
	var events corev1.EventList
	if err := k8s.List(testCtx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	shown := map[string]string{
		"status": fmt.Sprintf("%+v", getCluster(t, rc).Status),
		"log":    operatorLog.From(logStart),
	}
	for _, e := range events.Items {
		shown["events"] += e.Reason + " " + e.Message + "\n"
	}
	if !strings.Contains(shown["events"], "Vault answered 400") || !strings.Contains(shown["log"], "Cannot read the password source") {
		t.Fatalf("the failures were not reported (is the capture working?): events %q", shown["events"])
	}
	for where, text := range shown {
		for i, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("secret %d (%d characters) shows in the %s", i, len(s), where)
			}
		}
	}
}

// logBuffer keeps what the suite's operator logs; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// Len is how much has been logged so far.
func (b *logBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

// From returns what was logged after offset.
func (b *logBuffer) From(offset int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()[offset:]
}

// operatorLog is the suite's log (suite_test.go writes it there too).
var operatorLog = &logBuffer{}
