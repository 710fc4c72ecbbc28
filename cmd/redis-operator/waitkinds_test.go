package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestWaitsForItsCRDs starts the operator against an API server that does
// not serve its kinds yet, as when one apply or Argo CD sync creates the
// CRDs and the Deployment together. The operator keeps running, says what
// it waits for, answers /healthz 200 and /readyz 503 meanwhile (so the
// liveness probe does not restart it), and once the CRDs are installed it
// reconciles a RedisCluster with its manager's own probes ready.
func TestWaitsForItsCRDs(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		abs, _ := filepath.Abs(filepath.Join("..", "..", "bin"))
		t.Setenv("KUBEBUILDER_ASSETS", abs)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := cachev1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{Scheme: scheme} // no CRDs yet
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (run `make tools` first): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	u, err := env.AddUser(envtest.User{Name: "operator", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
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

	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "kustomize", "base", "crd", "bases")}, ErrorIfPathMissing: true, Scheme: scheme,
	}); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "late-crds", Namespace: "default"},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1},
	}
	if err := k8s.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
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
