package credentials

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestVaultErrorAnswersRedacted: whatever answers at the Vault address may
// echo what it was sent; the source's errors (which end in status and
// events) carry neither the JWT of the login nor the Vault token, and at
// most maxVaultErrorText bytes of the answer.
func TestVaultErrorAnswersRedacted(t *testing.T) {
	const jwt, vaultToken = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJl", "hvs.echoed-token-77aa"
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			JWT string `json:"jwt"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body.JWT != "" {
			// The login: echo the JWT, well past the length bound.
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []string{"bad jwt " + body.JWT + strings.Repeat(" padding", 200) + " " + body.JWT}})
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		_ = json.NewEncoder(w).Encode(map[string]any{"errors": []string{"token " + r.Header.Get("X-Vault-Token") + " is no good"}})
	}))
	t.Cleanup(server.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	base := VaultConfig{Address: server.URL, CACert: ca, Mount: "secret", Path: "redis/prod", Key: "password"}

	login := base
	login.Auth = VaultAuth{Kubernetes: &KubernetesAuth{Role: "redis", ServiceAccountToken: func(context.Context) (string, error) { return jwt, nil }}}
	err := fetchErr(t, mustSource(t, login), ErrAuthFailed)
	if strings.Contains(err.Error(), jwt) || strings.Contains(err.Error(), "eyJzdWIiOiJ0ZXN0In0") || !strings.Contains(err.Error(), "bad jwt [redacted]") {
		t.Errorf("login error shows the JWT or hides the answer: %v", err)
	}
	if len(err.Error()) > maxVaultErrorText+200 {
		t.Errorf("login error is %d bytes long", len(err.Error()))
	}

	read := base
	read.Auth = VaultAuth{Token: func(context.Context) (string, error) { return vaultToken, nil }}
	err = fetchErr(t, mustSource(t, read), ErrVaultError)
	if strings.Contains(err.Error(), vaultToken) || !strings.Contains(err.Error(), "Vault answered 500: token [redacted] is no good") {
		t.Errorf("read error: %v", err)
	}
}
