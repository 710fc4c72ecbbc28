package launch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartStop starts the plane as a process, reaches its API server with
// kubectl through the kubeconfig, and stops it, leaving no process that
// uses its state directory.
func TestStartStop(t *testing.T) {
	binDir := os.Getenv("LOCALPLANE_BIN_DIR")
	if binDir == "" {
		binDir = "../../../bin"
	}
	stateDir := t.TempDir()
	p, err := Start(t.Context(), Options{StateDir: stateDir, BinDir: binDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	out, err := exec.Command("kubectl", "--kubeconfig", p.Kubeconfig, "get", "nodes", "-o", "name").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "node/localplane" {
		t.Fatalf("kubectl get nodes = %q, %v; want node/localplane", out, err)
	}
	p.Stop()
	select {
	case <-p.Exited():
	default:
		t.Fatal("Stop returned before the plane exited")
	}
	if left := processesUsing(stateDir); len(left) > 0 {
		t.Errorf("processes left behind: %v", left)
	}
}

// processesUsing lists processes whose command line mentions dir.
func processesUsing(dir string) []string {
	var out []string
	files, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), dir) {
			out = append(out, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}
