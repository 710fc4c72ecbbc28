package backup

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/credentials"
	"github.com/redis-operator/redis-operator/controllers/credentials/vaultspec"
)

// leaked is the secret-looking text the answers below carry: what an
// internal service reached through a spec's endpoint might answer.
const leaked = "AKIAEXAMPLELEAKED/token=hunter2-0123456789"

// rawAnswer answers every request of an httptest server with raw, exactly
// as written (a status line of its own, or not HTTP at all).
func rawAnswer(t *testing.T, raw string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeRaw(w, raw) }))
	t.Cleanup(srv.Close)
	return srv.URL
}

// writeRaw writes raw on w's connection as it is, then closes it.
func writeRaw(w http.ResponseWriter, raw string) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer func() { _ = conn.Close() }()
	_, _ = buf.WriteString(raw)
	_ = buf.Flush()
}

// answering answers every request with status, headers and body.
func answering(t *testing.T, status int, header map[string]string, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestStoreErrorsCarryNoAnswerText: whatever answers at the endpoint, no
// byte of its answer (body, status text, minio's error headers, an S3
// <Message> or an undocumented <Code>) reaches the error a Store returns;
// the documented S3 code and the HTTP status do.
func TestStoreErrorsCarryNoAnswerText(t *testing.T) {
	fewRetries(t)
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		endpoint string
		want     []string // in the message
		sentinel error
		// closes: the server answers and closes without reading the
		// request, so a PUT may still be writing its body when the close
		// arrives, and its error then says that instead of the answer
		// (make test of 2026-12-07, "status text", on a loaded machine).
		closes bool
	}{
		{"plain text body", answering(t, http.StatusInternalServerError, nil, "internal error: "+leaked),
			[]string{"HTTP 500"}, nil, false},
		{"1 KiB body", answering(t, http.StatusBadGateway, nil, strings.Repeat(leaked, 30)),
			[]string{"HTTP 502"}, nil, false},
		{"S3 message", answering(t, http.StatusForbidden, map[string]string{"Content-Type": "application/xml"},
			`<Error><Code>AccessDenied</Code><Message>`+leaked+`</Message><RequestId>`+leaked+`</RequestId></Error>`),
			[]string{"S3 AccessDenied", "HTTP 403"}, ErrAccessDenied, false},
		{"undocumented code", answering(t, http.StatusBadRequest, map[string]string{"Content-Type": "application/xml"},
			`<Error><Code>`+leaked+`</Code><Message>m</Message></Error>`),
			[]string{"HTTP 400"}, nil, false},
		{"minio headers", answering(t, http.StatusBadRequest, map[string]string{"x-minio-error-code": "X" + leaked, "x-minio-error-desc": `"` + leaked + `"`}, ""),
			[]string{"HTTP 400"}, nil, false},
		{"status text", rawAnswer(t, "HTTP/1.1 500 "+leaked+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
			[]string{"HTTP 500"}, nil, true},
		{"not HTTP", rawAnswer(t, "SSH-2.0-"+leaked+"\r\n"),
			// A PUT may still be writing its body when net/http reads the
			// answer and closes the connection, or when the server's close
			// resets it (ECONNRESET or EPIPE on the write: make test of
			// 2026-12-07, on a loaded machine).
			[]string{"the answer is not HTTP|connection closed while sending|connection closed by the server"}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			store, err := NewStore(&cachev1beta1.ObjectStoreSpec{Endpoint: c.endpoint, Bucket: "bkt", Region: "us-east-1", ForcePathStyle: true},
				Keys{AccessKeyID: "id", SecretAccessKey: "secret"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			errs := []error{store.Check(ctx), store.Put(ctx, "p/ns/demo/b1/manifest.json", []byte("{}"), "application/json")}
			_, gerr := store.Get(ctx, "p/ns/demo/b1/manifest.json")
			errs = append(errs, gerr)
			for i, err := range errs {
				if err == nil {
					t.Fatalf("request %d succeeded", i)
				}
				msg := err.Error()
				if strings.Contains(msg, leaked) || strings.Contains(msg, "hunter2") {
					t.Errorf("request %d: the answer's text reached the error: %s", i, msg)
				}
				if len(msg) > 300 {
					t.Errorf("request %d: a %d-byte message: %s", i, len(msg), msg)
				}
				if i == 0 { // HEAD: no body, the status and headers
					for _, w := range c.want {
						if c.name != "S3 message" && !slices.ContainsFunc(strings.Split(w, "|"), func(alt string) bool { return strings.Contains(msg, alt) }) {
							t.Errorf("request %d: %q lacks %q", i, msg, w)
						}
					}
				}
				if i == 1 {
					for _, w := range c.want {
						if c.closes {
							w += "|connection closed while sending|connection closed by the server"
						}
						if !slices.ContainsFunc(strings.Split(w, "|"), func(alt string) bool { return strings.Contains(msg, alt) }) {
							t.Errorf("request %d: %q lacks %q", i, msg, w)
						}
					}
					if c.sentinel != nil && !errors.Is(err, c.sentinel) {
						t.Errorf("request %d: %v is not %v", i, err, c.sentinel)
					}
				}
			}
		})
	}
}

// TestVaultErrorsCarryNoAnswerText: the object store keys read from a
// "Vault" (any https or, here, http host the address policy lets through)
// that answers with error text: the error keeps the HTTP status and its
// credentials reason, not the text.
func TestVaultErrorsCarryNoAnswerText(t *testing.T) {
	for _, c := range []struct {
		name   string
		addr   string
		reason string
		want   string
	}{
		{"errors array", answering(t, http.StatusInternalServerError, map[string]string{"Content-Type": "application/json"},
			mustJSON(t, map[string]any{"errors": []string{"internal: " + leaked}})), "", "Vault answered 500"},
		{"permission denied", answering(t, http.StatusForbidden, map[string]string{"Content-Type": "application/json"},
			mustJSON(t, map[string]any{"errors": []string{leaked}})), credentials.ReasonAuthenticationFailed, "Vault answered 403"},
		{"not JSON", answering(t, http.StatusBadRequest, nil, "<html>"+leaked+"</html>"), "", "Vault answered 400"},
		{"not HTTP", rawAnswer(t, "SSH-2.0-"+leaked+"\r\n"), credentials.ReasonVaultUnreachable, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			vk := &VaultKeys{Log: logr.Discard(), Builder: vaultspec.Builder{
				Addresses: credentials.AddressPolicy{AllowInsecureHTTP: true},
				GetSecret: func(context.Context, string, string) (*corev1.Secret, error) {
					return nil, errors.New("no Secret is read here")
				},
				ServiceAccountToken: func(string, string, string) credentials.TokenFunc {
					return func(context.Context) (string, error) { return "sa-token", nil }
				},
				Timeout: 5 * time.Second,
			}}
			_, err := vk.Keys(context.Background(), "ns", "demo", &cachev1beta1.ObjectStoreVaultCredentials{
				Vault: cachev1beta1.VaultSource{Address: c.addr, Path: "s3", Role: "backup"}})
			if err == nil {
				t.Fatal("keys read")
			}
			msg := err.Error()
			if strings.Contains(msg, leaked) || strings.Contains(msg, "hunter2") {
				t.Fatalf("Vault's answer reached the error: %s", msg)
			}
			if c.want != "" && !strings.Contains(msg, c.want) {
				t.Errorf("%q lacks %q", msg, c.want)
			}
			if r := credentials.Reason(err); c.reason != "" && r != c.reason {
				t.Errorf("reason %s, want %s (%s)", r, c.reason, msg)
			} else if r == credentials.ReasonFetchFailed {
				t.Errorf("the redaction lost the error's kind: %s", msg)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fewRetries makes the Stores a test opens retry once, not 10 times with
// backoff, for the duration of the test.
func fewRetries(t *testing.T) {
	old := storeMaxRetries
	storeMaxRetries = 1
	t.Cleanup(func() { storeMaxRetries = old })
}
