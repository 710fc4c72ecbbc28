//go:build !realvault

package credentials

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"
)

// vaultOptions tunes the local test Vault.
type vaultOptions struct {
	// namespace makes the server accept only this X-Vault-Namespace.
	namespace string
}

var (
	buildOnce sync.Once
	vaultBin  string
	buildErr  error
)

// vaultServerBinary builds test/vaultserver's command once per test run.
// It is a separate Go module (Vault's plugin backends pin their own
// dependency versions), so it runs as a process, as a real Vault would.
func vaultServerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		vaultBin = filepath.Join(tmpDir, "vaultserver")
		cmd := exec.Command("go", "build", "-o", vaultBin, "./cmd/vaultserver")
		cmd.Dir = filepath.Join("..", "..", "test", "vaultserver")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build test/vaultserver/cmd/vaultserver: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return vaultBin
}

// newVault starts a test Vault process on 127.0.0.1 for one test; KV v2 is
// at "secret/" and Kubernetes auth at "auth/kubernetes/".
func newVault(t *testing.T, opts vaultOptions) *vaultTarget {
	t.Helper()
	rootToken := "root-" + rand.Text()
	args := []string{"--listen", "127.0.0.1:0", "--log-level", "trace"}
	if opts.namespace != "" {
		args = append(args, "--namespace", opts.namespace)
	}
	cmd := exec.Command(vaultServerBinary(t), args...)
	cmd.Env = append(os.Environ(), "VAULT_DEV_ROOT_TOKEN_ID="+rootToken)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start vaultserver: %v", err)
	}
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
		})
	}
	t.Cleanup(stop)

	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "VAULT_ADDR="); ok {
				addrCh <- a
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(60 * time.Second):
		t.Fatalf("vaultserver printed no VAULT_ADDR within 60s; stderr:\n%s", stderr.String())
	}

	cfg := api.DefaultConfig()
	cfg.Address = addr
	cfg.MaxRetries = 0
	root, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	root.SetToken(rootToken)
	if opts.namespace != "" {
		root.SetNamespace(opts.namespace)
	}
	if _, err := root.Sys().HealthWithContext(context.Background()); err != nil {
		t.Fatalf("vaultserver health: %v", err)
	}
	return &vaultTarget{
		addr:      addr,
		root:      root,
		namespace: opts.namespace,
		kvMount:   "secret",
		authMount: "kubernetes",
		serverLog: stderr.String,
		interruptible: func(*testing.T) (string, func()) {
			return addr, stop
		},
	}
}

// TestVaultNamespaceHeader uses a server that answers only for one
// namespace: the source must send X-Vault-Namespace on login and reads.
func TestVaultNamespaceHeader(t *testing.T) {
	f := newFixture(t, vaultOptions{namespace: "team-a"})
	f.putPassword(t, "prod", map[string]any{"password": "pw"})
	if c := fetch(t, mustSource(t, f.config("prod"))); c.Password.Reveal() != "pw" {
		t.Fatalf("with the namespace: %q", c.Password.Reveal())
	}
	cfg := f.config("prod")
	cfg.Namespace = ""
	fetchErr(t, mustSource(t, cfg), ErrAuthFailed)
}
