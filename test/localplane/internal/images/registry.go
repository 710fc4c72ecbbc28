package images

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Dir is the per-user images cache, shared by every clone on the machine:
// ${REDIS_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/redis-operator}/images,
// as hack/build-tools.sh keeps its tools. It holds registry/ (the registry's
// storage), stamps/ (one file per image: the stamp it was built with) and
// work/ (rootfs trees and logs of builds in progress).
func Dir() (string, error) {
	if d := os.Getenv("REDIS_OPERATOR_CACHE"); d != "" {
		return filepath.Join(d, "images"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "redis-operator", "images"), nil
}

// Registry is a running CNCF Distribution registry (bin/registry) serving a
// storage directory over plain HTTP on 127.0.0.1.
type Registry struct {
	// Addr is host:port, on 127.0.0.1.
	Addr string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRegistry runs binDir/registry on a free port of 127.0.0.1 with its
// filesystem storage in storage (created if missing), read-only unless
// writable, logging to logPath, and returns once it answers /v2/. The
// registry is killed when ctx ends or Stop is called; with a parent-death
// signal, it also dies with this process.
func StartRegistry(ctx context.Context, binDir, storage, logPath string, writable bool) (*Registry, error) {
	bin := filepath.Join(binDir, "registry")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("images: %s is missing: run `make tools`", bin)
	}
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  maintenance:
    uploadpurging:
      enabled: false
    readonly:
      enabled: %t
http:
  addr: %s
`, storage, !writable, addr)
	configPath := logPath + ".yaml"
	if err := os.WriteFile(configPath, []byte(config), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, bin, "serve", configPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("images: starting the registry: %w", err)
	}
	r := &Registry{Addr: addr, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return r, nil
			}
		}
		select {
		case <-r.done:
			return nil, fmt.Errorf("images: the registry exited at start (log: %s)", logPath)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Stop()
			return nil, errors.New("images: the registry did not answer /v2/ within 30 s (log: " + logPath + ")")
		}
	}
}

// Stop kills the registry and waits for it to exit.
func (r *Registry) Stop() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// freePort is a TCP port of 127.0.0.1 nothing listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
