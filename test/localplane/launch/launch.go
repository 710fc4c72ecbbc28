// Package launch starts the local plane (module
// github.com/redis-operator/redis-operator/test/localplane) as a child
// process, for test suites in modules on another Kubernetes library line:
// it needs only the standard library, so any module can require it (with
// a replace directive to this directory) without its dependencies.
//
//	p, err := launch.Start(ctx, launch.Options{StateDir: t.TempDir(), BinDir: "../../bin"})
//	...
//	defer p.Stop()
//	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig)
package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// Options configure Start.
type Options struct {
	// StateDir is the plane's state directory (see package localplane);
	// created if missing. Required.
	StateDir string
	// BinDir holds etcd, kube-apiserver and kube-controller-manager (built
	// by `make tools`). The localplane command is built into it. Required.
	BinDir string
	// Output receives the plane's own output; the components' logs are in
	// <StateDir>/logs. Discarded when nil.
	Output io.Writer
	// Timeout bounds the build and the start; 3 minutes when zero.
	Timeout time.Duration
}

// Plane is a local plane running as a child process.
type Plane struct {
	// Kubeconfig is the path of the plane's admin kubeconfig.
	Kubeconfig string
	// StateDir is the absolute state directory.
	StateDir string

	cmd  *exec.Cmd
	done chan struct{}
}

// moduleDir is the local plane module's directory, found from this file's
// location (launch/ sits inside it).
func moduleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("launch: cannot locate the localplane module")
	}
	return filepath.Dir(filepath.Dir(file)), nil
}

// Start builds the localplane command into BinDir (a no-op when the build
// cache is current), runs `localplane up`, and returns once the plane is
// ready. The child gets SIGTERM if this process dies, and then stops every
// process it started.
func Start(ctx context.Context, o Options) (*Plane, error) {
	if o.StateDir == "" || o.BinDir == "" {
		return nil, errors.New("launch: StateDir and BinDir are required")
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Output == nil {
		o.Output = io.Discard
	}
	stateDir, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, err
	}
	binDir, err := filepath.Abs(o.BinDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	mod, err := moduleDir()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(binDir, "localplane")
	build := exec.CommandContext(ctx, "go", "-C", mod, "build", "-o", bin, "./cmd/localplane")
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("launch: building localplane: %v\n%s", err, out)
	}

	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}
	ready := filepath.Join(stateDir, "ready")
	_ = os.Remove(ready)
	cmd := exec.Command(bin, "up", "--state-dir", stateDir, "--bin-dir", binDir)
	cmd.Stdout, cmd.Stderr = o.Output, o.Output
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("launch: starting localplane: %w", err)
	}
	p := &Plane{Kubeconfig: filepath.Join(stateDir, "kubeconfig"), StateDir: stateDir, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(ready); err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("launch: localplane exited before it was ready (%v); see %s", cmd.ProcessState, filepath.Join(stateDir, "logs"))
		case <-ctx.Done():
			p.Stop()
			return nil, fmt.Errorf("launch: localplane not ready; see %s: %w", filepath.Join(stateDir, "logs"), ctx.Err())
		case <-tick.C:
		}
	}
}

// Stop asks the plane to stop (SIGTERM: pods, controller manager, API
// server and etcd stop in turn) and waits until it has; after a minute it
// kills it (its children then die with it). Stop is idempotent.
func (p *Plane) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Exited is closed when the plane's process has exited.
func (p *Plane) Exited() <-chan struct{} { return p.done }
