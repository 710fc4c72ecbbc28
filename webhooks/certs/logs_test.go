package certs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	stdlog "log"
	"os"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// logCapture is the process's controller-runtime log (the operator's, the
// manager's and cert-controller's, which logs through controller-runtime's
// logger: JSON lines) and its standard library log (where net/http logs a
// refused TLS handshake), copied to stderr and kept.
type logCapture struct {
	mu    sync.Mutex
	lines [][]byte
	part  []byte
}

func (c *logCapture) Write(p []byte) (int, error) {
	os.Stderr.Write(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.part = append(c.part, p...)
	for {
		i := bytes.IndexByte(c.part, '\n')
		if i < 0 {
			break
		}
		c.lines = append(c.lines, append([]byte(nil), c.part[:i]...))
		c.part = c.part[i+1:]
	}
	return len(p), nil
}

// mark is the number of lines logged so far.
func (c *logCapture) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.lines)
}

// errorsSince returns the lines logged after mark above info level (warn,
// error, ...), and any line that is not a JSON log entry.
func (c *logCapture) errorsSince(mark int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range c.lines[mark:] {
		var entry struct {
			Level string `json:"level"`
		}
		if json.Unmarshal(l, &entry) != nil || (entry.Level != "info" && entry.Level != "debug") {
			out = append(out, string(l))
		}
	}
	return out
}

var (
	logsOnce sync.Once
	logs     = &logCapture{}
)

// captureLogs makes controller-runtime's logger write to logs. The logger
// can be set only once per process, so every test calls this.
func captureLogs() *logCapture {
	logsOnce.Do(func() {
		log.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(false)))
		stdlog.SetOutput(logs)
	})
	return logs
}

// TestCleanStartLogsNoError: a normal start logs no error. Two replicas
// start at once (the prod overlay runs three) into an existing namespace
// with no certificate Secret yet, create it, agree on one certificate,
// inject the CA and serve the webhooks through the API server: not one
// line at error level (or warning) from the operator, the manager or
// cert-controller's rotator, nor a refused TLS handshake from net/http.
func TestCleanStartLogsNoError(t *testing.T) {
	logs := captureLogs()
	cfg, scheme, c := startAPIServer(t)
	ctx := context.Background()
	port := freePort(t)
	installWebhookObjects(t, c, port)
	namespace := "redis-operator-system"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		t.Fatal(err)
	}

	mark := logs.mark()
	first := startReplica(t, cfg, scheme, namespace, port, "clean-start-first")
	second := startReplica(t, cfg, scheme, namespace, freePort(t), "clean-start-second")
	eventually(t, "both replicas ready", func() error {
		return errors.Join(first.readiness(""), second.readiness(""))
	})
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "redis-operator-webhook-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	eventually(t, "CA injected", func() error { return injected(ctx, c, secret.Data["ca.crt"]) })
	eventually(t, "webhooks through the API server", func() error { return webhooksWork(ctx, c, "default", "clean") })
	if errs := logs.errorsSince(mark); len(errs) > 0 {
		t.Errorf("a clean start logged %d lines above info:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}
