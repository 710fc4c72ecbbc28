// Command localplane runs the local plane (see package localplane) from a
// shell.
//
//	localplane up   --state-dir DIR [--bin-dir DIR] [--node-name NAME] [--nodes N]
//	                [--registry HOST:PORT]
//	    Start the plane (N real nodes, default 3, named NAME-1 ... NAME-N,
//	    default localplane-1 ..., in zones zone-a, -b, -c in turn, pulling
//	    images through the registry, by default the one `make images`
//	    fills) and run until SIGINT or SIGTERM, then stop every process it
//	    started. Writes DIR/kubeconfig, DIR/localplane.pid, and DIR/ready
//	    once the plane is usable, and takes node commands on
//	    DIR/control.sock.
//	localplane node lose|restore --state-dir DIR NODE
//	    Make a node of the running plane fail as a machine that lost power
//	    (its kubelet, containerd and containers killed, its lease no longer
//	    renewed), or boot it again (see Plane.LoseNode, Plane.RestoreNode).
//	localplane wait --state-dir DIR [--timeout 3m]
//	    Wait until the plane started by `up` in DIR is ready.
//	localplane down --state-dir DIR [--timeout 1m]
//	    Stop the plane started by `up` in DIR and wait until it is gone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis-operator/redis-operator/test/localplane"
	"github.com/redis-operator/redis-operator/test/localplane/internal/controlplane"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
	"github.com/redis-operator/redis-operator/test/localplane/internal/proctree"
	"github.com/redis-operator/redis-operator/test/localplane/internal/realnode"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "wait":
		err = wait(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	case "node":
		err = nodeCommand(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localplane:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localplane up|wait|down|node --state-dir DIR [flags]")
	os.Exit(2)
}

func pidFile(stateDir string) string   { return filepath.Join(stateDir, "localplane.pid") }
func readyFile(stateDir string) string { return filepath.Join(stateDir, "ready") }

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	stateDir := fs.String("state-dir", "", "directory for the plane's state (required)")
	binDir := fs.String("bin-dir", "bin", "`DIR` with the binaries of make tools (etcd, kube-apiserver, kubelet, ...)")
	nodeName := fs.String("node-name", localplane.DefaultNodeName, "prefix `NAME` of the nodes' names (NAME-1, NAME-2, ...)")
	nodes := fs.Int("nodes", localplane.DefaultNodes, "number `N` of nodes, each the real kubelet with a containerd of its own")
	registry := fs.String("registry", "", "`HOST:PORT` of the OCI registry (plain HTTP) the nodes pull images through (default: one the plane runs on what make images built)")
	_ = fs.Parse(args)
	if *stateDir == "" {
		return errors.New("--state-dir is required")
	}
	if *nodes < 1 {
		return fmt.Errorf("--nodes %d: a plane needs at least one node", *nodes)
	}
	if err := os.MkdirAll(*stateDir, 0o755); err != nil {
		return err
	}
	if pid, alive := running(*stateDir); alive {
		return fmt.Errorf("a plane (pid %d) already runs in %s; stop it with `localplane down --state-dir %s`", pid, *stateDir, *stateDir)
	}
	_ = os.Remove(readyFile(*stateDir))
	if err := os.WriteFile(pidFile(*stateDir), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(pidFile(*stateDir))

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	p, err := localplane.Start(ctx, localplane.Options{StateDir: *stateDir, BinDir: *binDir, NodeName: *nodeName,
		Nodes: *nodes, Registry: *registry})
	if err != nil {
		return err
	}
	defer p.Stop()
	if err := serveControl(ctx, p); err != nil {
		return err
	}
	if err := os.WriteFile(readyFile(*stateDir), []byte(p.Kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	defer os.Remove(readyFile(*stateDir))
	fmt.Printf("Local plane is up (nodes %s, logs in %s).\n  export KUBECONFIG=%s\nStop it with Ctrl-C or `localplane down --state-dir %s`.\n",
		strings.Join(p.Nodes, ", "), controlplane.LogDir(p.StateDir), p.Kubeconfig, p.StateDir)

	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Println("Stopping the local plane")
			return nil
		case <-tick.C:
			if err := p.Err(); err != nil {
				return err
			}
		}
	}
}

// running reads the pid of `up` in stateDir and reports whether it lives.
func running(stateDir string) (int, bool) {
	b, err := os.ReadFile(pidFile(stateDir))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, syscall.Kill(pid, 0) == nil
}

func wait(args []string) error {
	fs := flag.NewFlagSet("wait", flag.ExitOnError)
	stateDir := fs.String("state-dir", "", "state directory of the plane (required)")
	timeout := fs.Duration("timeout", 3*time.Minute, "how long to wait")
	_ = fs.Parse(args)
	if *stateDir == "" {
		return errors.New("--state-dir is required")
	}
	deadline := time.Now().Add(*timeout)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(readyFile(*stateDir)); err == nil {
			return nil
		}
		if _, err := os.Stat(pidFile(*stateDir)); err == nil {
			if _, alive := running(*stateDir); !alive {
				return fmt.Errorf("the plane in %s exited before it was ready; see %s", *stateDir, controlplane.LogDir(*stateDir))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the plane in %s was not ready within %s; see %s", *stateDir, *timeout, controlplane.LogDir(*stateDir))
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	stateDir := fs.String("state-dir", "", "state directory of the plane (required)")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for a clean stop before killing")
	_ = fs.Parse(args)
	if *stateDir == "" {
		return errors.New("--state-dir is required")
	}
	if pid, alive := running(*stateDir); alive {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(*timeout)
		for time.Now().Before(deadline) {
			if syscall.Kill(pid, 0) != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if syscall.Kill(pid, 0) == nil {
			fmt.Fprintf(os.Stderr, "localplane: pid %d did not stop within %s; killing it\n", pid, *timeout)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	// Whatever a killed plane left behind.
	if err := realnode.SweepAll(*stateDir); err != nil {
		return err
	}
	if killed, err := proctree.Sweep(controlplane.RunDir(*stateDir)); err != nil {
		return err
	} else if len(killed) > 0 {
		fmt.Fprintf(os.Stderr, "localplane: killed leftover processes: %s\n", strings.Join(killed, ", "))
	}
	if err := podnet.Sweep(*stateDir); err != nil {
		return err
	}
	_ = os.Remove(pidFile(*stateDir))
	_ = os.Remove(readyFile(*stateDir))
	return nil
}
