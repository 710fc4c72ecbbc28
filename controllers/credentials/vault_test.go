package credentials

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/hashicorp/vault/api"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func fetch(t *testing.T, s Source) Credential {
	t.Helper()
	c, err := s.Fetch(context.Background())
	if err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	return c
}

func fetchErr(t *testing.T, s Source, want error) error {
	t.Helper()
	_, err := s.Fetch(context.Background())
	if !errors.Is(err, want) {
		t.Fatalf("Fetch: err = %v, want %v", err, want)
	}
	return err
}

func TestVaultKubernetesAuthReadsLatestAndPinnedVersions(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	v1 := f.putPassword(t, "prod", map[string]any{"password": "first-pw"})
	v2 := f.putPassword(t, "prod", map[string]any{"password": "second-pw"})
	where := f.vault.kvMount + "/data/redis/prod"

	latest := mustSource(t, f.config("prod"))
	c := fetch(t, latest)
	if c.Password.Reveal() != "second-pw" || c.Version != fmt.Sprintf("vault:%s#v%d", where, v2) {
		t.Fatalf("latest = %q %s, want second-pw at v%d", c.Password.Reveal(), c.Version, v2)
	}

	pinnedCfg := f.config("prod")
	pinnedCfg.Version = v1
	c = fetch(t, mustSource(t, pinnedCfg))
	if c.Password.Reveal() != "first-pw" || c.Version != fmt.Sprintf("vault:%s#v%d", where, v1) {
		t.Fatalf("pinned = %q %s, want first-pw at v%d", c.Password.Reveal(), c.Version, v1)
	}

	// A new version is seen by the same source, which keeps its token.
	v3 := f.putPassword(t, "prod", map[string]any{"password": "third-pw"})
	c = fetch(t, latest)
	if c.Password.Reveal() != "third-pw" || c.Version != fmt.Sprintf("vault:%s#v%d", where, v3) {
		t.Fatalf("after a new version = %q %s, want third-pw at v%d", c.Password.Reveal(), c.Version, v3)
	}
	if n := len(f.loginTokens(t)); n != 2 {
		t.Fatalf("%d login tokens, want 2 (one per source; the latest source reuses its token)", n)
	}
}

func TestVaultPermissionDeniedOutsidePolicy(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	if _, err := f.vault.root.KVv2(f.vault.kvMount).Put(context.Background(), "other/app", map[string]any{"password": "x"}); err != nil {
		t.Fatal(err)
	}
	cfg := f.config("")
	cfg.Path = "other/app"
	s := mustSource(t, cfg)
	err := fetchErr(t, s, ErrPermissionDenied)
	if Reason(err) != ReasonPermissionDenied {
		t.Fatalf("Reason = %q", Reason(err))
	}
	// The token is valid, so the source did not log in a second time.
	if n := len(f.loginTokens(t)); n != 1 {
		t.Fatalf("%d login tokens after a policy refusal, want 1", n)
	}
}

func TestVaultMissingSecretKeyAndVersion(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	f.putPassword(t, "nokey", map[string]any{"user": "default"})
	f.putPassword(t, "empty", map[string]any{"password": ""})
	f.putPassword(t, "deleted", map[string]any{"password": "gone"})
	if err := f.vault.root.KVv2(f.vault.kvMount).Delete(context.Background(), "redis/deleted"); err != nil {
		t.Fatal(err)
	}

	fetchErr(t, mustSource(t, f.config("absent")), ErrSecretNotFound)
	fetchErr(t, mustSource(t, f.config("nokey")), ErrKeyMissing)
	fetchErr(t, mustSource(t, f.config("empty")), ErrInvalidPassword)
	fetchErr(t, mustSource(t, f.config("deleted")), ErrSecretNotFound)
	pinned := f.config("nokey")
	pinned.Version = 7
	fetchErr(t, mustSource(t, pinned), ErrSecretNotFound)
}

func TestVaultLoginRejected(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	f.putPassword(t, "prod", map[string]any{"password": "pw"})

	// A ServiceAccount the role is not bound to.
	serviceAccount(t, f.kube, f.ns, "intruder")
	cfg := f.config("prod")
	cfg.Auth.Kubernetes.ServiceAccountToken = ServiceAccountToken(f.kube, f.ns, "intruder", audience, 0)
	err := fetchErr(t, mustSource(t, cfg), ErrAuthFailed)
	if Reason(err) != ReasonAuthenticationFailed {
		t.Fatalf("Reason = %q", Reason(err))
	}

	// The right ServiceAccount with a token for another audience.
	cfg = f.config("prod")
	cfg.Auth.Kubernetes.ServiceAccountToken = ServiceAccountToken(f.kube, f.ns, operatorSA, "not-vault", 0)
	fetchErr(t, mustSource(t, cfg), ErrAuthFailed)

	// A role that does not exist.
	cfg = f.config("prod")
	cfg.Auth.Kubernetes.Role = "no-such-role"
	fetchErr(t, mustSource(t, cfg), ErrAuthFailed)

	// TokenRequest itself fails: the ServiceAccount does not exist.
	cfg = f.config("prod")
	cfg.Auth.Kubernetes.ServiceAccountToken = ServiceAccountToken(f.kube, f.ns, "missing", audience, 0)
	fetchErr(t, mustSource(t, cfg), ErrAuthFailed)

	if n := len(f.loginTokens(t)); n != 0 {
		t.Fatalf("%d login tokens after rejected logins, want 0", n)
	}

	// A token of a ServiceAccount that was deleted and created again: its
	// claims still name the bound account, so only the apiserver's answer to
	// the backend's TokenReview can tell that it is no longer valid.
	ctx := context.Background()
	stale, err := ServiceAccountToken(f.kube, f.ns, operatorSA, audience, 0)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.kube.CoreV1().ServiceAccounts(f.ns).Delete(ctx, operatorSA, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	serviceAccount(t, f.kube, f.ns, operatorSA)
	cfg = f.config("prod")
	cfg.Auth.Kubernetes.ServiceAccountToken = func(context.Context) (string, error) { return stale, nil }
	fetchErr(t, mustSource(t, cfg), ErrAuthFailed)
	// The local server logs the backend's reason: the apiserver's TokenReview
	// answer. Its log arrives through a pipe, so give it a moment.
	if f.vault.serverLog() != "" {
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(f.vault.serverLog(), "does not match claim") {
			if time.Now().After(deadline) {
				t.Fatalf("the Vault log does not show the TokenReview rejection:\n%s", f.vault.serverLog())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if c := fetch(t, mustSource(t, f.config("prod"))); c.Password.Reveal() != "pw" {
		t.Fatalf("fresh token of the new account: %q", c.Password.Reveal())
	}
}

func TestVaultDownIsUnreachable(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	f.putPassword(t, "prod", map[string]any{"password": "pw"})
	addr, stop := f.vault.interruptible(t)
	cfg := f.config("prod")
	cfg.Address = addr
	s := mustSource(t, cfg)
	if c := fetch(t, s); c.Password.Reveal() != "pw" {
		t.Fatalf("before Vault stops: %q", c.Password.Reveal())
	}
	stop()
	err := fetchErr(t, s, ErrVaultUnreachable)
	if Reason(err) != ReasonVaultUnreachable {
		t.Fatalf("Reason = %q", Reason(err))
	}
	// A new source cannot log in either.
	fetchErr(t, mustSource(t, cfg), ErrVaultUnreachable)
}

func TestVaultOverTLSWithCA(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	f.putPassword(t, "prod", map[string]any{"password": "pw"})
	u, err := url.Parse(f.vault.addr)
	if err != nil {
		t.Fatal(err)
	}
	// A TLS front with its own self-signed certificate for 127.0.0.1.
	front := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(u))
	t.Cleanup(front.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw})

	cfg := f.config("prod")
	cfg.Address = front.URL
	fetchErr(t, mustSource(t, cfg), ErrVaultUnreachable) // unknown authority

	cfg.CACert = caPEM
	if c := fetch(t, mustSource(t, cfg)); c.Password.Reveal() != "pw" {
		t.Fatalf("over TLS: %q", c.Password.Reveal())
	}
}

func TestVaultRevokedTokenLogsInAgain(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	f.putPassword(t, "prod", map[string]any{"password": "pw"})
	s := mustSource(t, f.config("prod"))
	fetch(t, s)
	before := f.loginTokens(t)
	if len(before) != 1 {
		t.Fatalf("%d login tokens, want 1", len(before))
	}
	old := keysOf(before)[0]
	write(t, f.vault.root, "auth/token/revoke-accessor", map[string]any{"accessor": old})

	if c := fetch(t, s); c.Password.Reveal() != "pw" {
		t.Fatalf("after revocation: %q", c.Password.Reveal())
	}
	after := f.loginTokens(t)
	if _, stillThere := after[old]; stillThere || len(after) != 1 {
		t.Fatalf("login tokens after revocation = %v, want one new token", keysOf(after))
	}
}

func TestVaultTokenRenewedThenReplacedWhenExpired(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	f.putPassword(t, "prod", map[string]any{"password": "pw"})
	clock := &fakeClock{now: time.Now()}
	cfg := f.config("prod")
	cfg.Now = clock.Now
	s := mustSource(t, cfg)
	fetch(t, s)
	first := f.loginTokens(t)
	if len(first) != 1 {
		t.Fatalf("%d login tokens, want 1", len(first))
	}
	acc := keysOf(first)[0]
	if first[acc]["last_renewal_time"] != nil {
		t.Fatalf("fresh token already renewed: %v", first[acc])
	}

	// 50 minutes into a 1h token: less than a third left, so it is renewed.
	clock.Advance(50 * time.Minute)
	fetch(t, s)
	renewed := f.loginTokens(t)
	if len(renewed) != 1 || renewed[acc] == nil || renewed[acc]["last_renewal_time"] == nil {
		t.Fatalf("after 50m: login tokens %v, want the same token, renewed", renewed)
	}

	// Past its expiry by the source's clock: a new login, not a renewal.
	clock.Advance(3 * time.Hour)
	fetch(t, s)
	replaced := f.loginTokens(t)
	if len(replaced) != 2 {
		t.Fatalf("after expiry: login tokens %v, want the old one and a new one", keysOf(replaced))
	}
}

func TestVaultTokenFromSecret(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	f.putPassword(t, "prod", map[string]any{"password": "pw"})
	tok, err := f.vault.root.Auth().Token().Create(&api.TokenCreateRequest{Policies: []string{f.vault.prefix + "redis-read"}, TTL: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.kube.CoreV1().Secrets(f.ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "vault-token"},
		Data:       map[string][]byte{"token": []byte(tok.Auth.ClientToken)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := f.config("prod")
	cfg.Auth = VaultAuth{Token: TokenFromSecret(SecretGetterFor(f.kube), f.ns, "vault-token", "token")}
	if c := fetch(t, mustSource(t, cfg)); c.Password.Reveal() != "pw" {
		t.Fatalf("with a token from a Secret: %q", c.Password.Reveal())
	}

	// A revoked token is an authentication failure, not a policy refusal.
	write(t, f.vault.root, "auth/token/revoke-accessor", map[string]any{"accessor": tok.Auth.Accessor})
	fetchErr(t, mustSource(t, cfg), ErrAuthFailed)

	cfg.Auth = VaultAuth{Token: TokenFromSecret(SecretGetterFor(f.kube), f.ns, "no-such-secret", "token")}
	err = fetchErr(t, mustSource(t, cfg), ErrAuthFailed)
	if !errors.Is(err, ErrSecretNotFound) {
		t.Fatalf("err = %v, want it to say the token Secret is missing", err)
	}
}

// TestNoSecretInLogs drives a source through login, revocation, renewal,
// expiry and errors with every log line captured (the source's logger at
// full verbosity, the standard library logger, the Vault server's own log),
// then searches them, the errors and the printed credentials for the
// passwords, every token involved and the other values of Vault's answers.
func TestNoSecretInLogs(t *testing.T) {
	f := newFixture(t, vaultOptions{})
	passwords := []string{"pw-one-5f1c2a", "pw-two-9d8e7b"}
	const otherField = "vault-response-field-3c1d"
	f.putPassword(t, "prod", map[string]any{"password": passwords[0], "api-key": otherField})

	var logs syncBuffer
	logger := funcr.New(func(prefix, args string) { fmt.Fprintln(&logs, prefix, args) }, funcr.Options{Verbosity: 10})
	prevOut := log.Writer()
	log.SetOutput(&logs)
	t.Cleanup(func() { log.SetOutput(prevOut) })

	var secrets []string
	secrets = append(secrets, passwords...)
	secrets = append(secrets, otherField, f.vault.root.Token())
	clock := &fakeClock{now: time.Now()}
	cfg := f.config("prod")
	cfg.Logger = logger
	cfg.Now = clock.Now
	inner := cfg.Auth.Kubernetes.ServiceAccountToken
	cfg.Auth.Kubernetes.ServiceAccountToken = func(ctx context.Context) (string, error) {
		jwt, err := inner(ctx)
		secrets = append(secrets, jwt)
		return jwt, err
	}
	s := mustSource(t, cfg)

	var printed []string
	record := func(c Credential, err error) {
		printed = append(printed, fmt.Sprintf("%v %+v %#v %s", c, c, c, c.Password))
		js, _ := json.Marshal(c)
		printed = append(printed, string(js))
		if err != nil {
			printed = append(printed, err.Error(), fmt.Sprintf("%+v", err))
		}
		if tok := s.client.Token(); tok != "" && !slices.Contains(secrets, tok) {
			secrets = append(secrets, tok)
		}
	}
	record(s.Fetch(context.Background())) // login
	for acc := range f.loginTokens(t) {
		write(t, f.vault.root, "auth/token/revoke-accessor", map[string]any{"accessor": acc})
	}
	record(s.Fetch(context.Background())) // re-login after revocation
	f.putPassword(t, "prod", map[string]any{"password": passwords[1], "api-key": otherField})
	clock.Advance(50 * time.Minute)
	record(s.Fetch(context.Background())) // renewal
	clock.Advance(3 * time.Hour)
	record(s.Fetch(context.Background())) // login after expiry
	denied := f.config("")
	denied.Path = "other/app"
	denied.Logger = logger
	ds := mustSource(t, denied)
	record(ds.Fetch(context.Background())) // an error

	// Stop the server so that all of its log has arrived.
	_, stopVault := f.vault.interruptible(t)
	stopVault()
	all := logs.String() + "\n" + f.vault.serverLog() + "\n" + strings.Join(printed, "\n")
	if !strings.Contains(logs.String(), "Logging in to Vault") || !strings.Contains(logs.String(), "Renewed the Vault token") ||
		!strings.Contains(logs.String(), "logging in again") {
		t.Fatalf("the captured log lacks the expected lines (is capture working?):\n%s", logs.String())
	}
	if len(secrets) < 6 {
		t.Fatalf("collected only %d secrets to look for, want passwords, root token, JWTs and Vault tokens", len(secrets))
	}
	for _, sec := range secrets {
		if sec != "" && strings.Contains(all, sec) {
			t.Errorf("a secret (%d characters) appears in the captured output", len(sec))
		}
	}
}

// TestServiceAccountTokenAudience checks what the TokenRequest helper asks
// for, through TokenReview on the apiserver: the token is for the
// ServiceAccount and only for the audience given.
func TestServiceAccountTokenAudience(t *testing.T) {
	kc, _ := kube(t)
	ns := namespace(t, kc)
	serviceAccount(t, kc, ns, operatorSA)
	jwt, err := ServiceAccountToken(kc, ns, operatorSA, audience, 0)(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		audience string
		want     bool
	}{{audience, true}, {"other", false}} {
		rev, err := kc.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: jwt, Audiences: []string{tc.audience}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rev.Status.Authenticated != tc.want {
			t.Fatalf("review for audience %q: authenticated %v, want %v", tc.audience, rev.Status.Authenticated, tc.want)
		}
		if tc.want && rev.Status.User.Username != "system:serviceaccount:"+ns+":"+operatorSA {
			t.Fatalf("token user = %q", rev.Status.User.Username)
		}
	}
}
