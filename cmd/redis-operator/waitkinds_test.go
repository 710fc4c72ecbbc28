package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestWaitsForItsCRDs starts the operator against an API server that does
// not serve its kinds yet, as when one apply or Argo CD sync creates the
// CRDs and the Deployment together. The operator keeps running, says what
// it waits for, answers /healthz 200 and /readyz 503 meanwhile (so the
// liveness probe does not restart it), and once the CRDs are installed it
// reconciles a RedisCluster with its manager's own probes ready.
func TestWaitsForItsCRDs(t *testing.T) {
	env, cfg, scheme := startEnvtestCRDs(t, false)
	kubeconfigPath := kubeconfigFor(t, env, cfg, "operator")
	probeAddr := freeAddr(t)

	exited, logs := runOperator(t, "", "--kubeconfig", kubeconfigPath, "--webhooks=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", probeAddr, "--resync-period", "10s")

	// Waiting: alive, not ready, and saying why.
	waitOperator(t, 60*time.Second, exited, logs, func() error {
		if !strings.Contains(logs.String(), "Waiting for the API server to serve the operator's kinds") {
			return fmt.Errorf("the operator does not say it waits for its kinds")
		}
		if code, body := probe(probeAddr, "/healthz"); code != http.StatusOK {
			return fmt.Errorf("/healthz while waiting: %d %s", code, body)
		}
		if code, body := probe(probeAddr, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "cache.redis.io/v1beta1") {
			return fmt.Errorf("/readyz while waiting: %d %q, want 503 naming cache.redis.io/v1beta1", code, body)
		}
		return nil
	})
	time.Sleep(2 * kindsPollInterval)
	select {
	case e := <-exited:
		t.Fatalf("the operator exited while its CRDs were missing: %v\n%s", e, logs.String())
	default:
	}

	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: crdPaths, ErrorIfPathMissing: true, Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k8s, rc := createCluster(t, cfg, scheme, "late-crds")
	waitOperator(t, 60*time.Second, exited, logs, func() error {
		if code, body := probe(probeAddr, "/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz after the CRDs: %d %s", code, body)
		}
		return reconciled(ctx, k8s, rc)
	})
}

// freeAddr is a 127.0.0.1 address with a port free at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// probe GETs path on addr over HTTP and returns the status code and body
// (0 and the error's text when there is no answer).
func probe(addr, path string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
