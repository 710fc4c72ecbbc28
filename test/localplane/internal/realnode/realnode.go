// Package realnode runs the local plane's real nodes: each is the real
// kubelet (bin/kubelet, Kubernetes v1.34) against a containerd of its own
// (Debian's 1.6, with runc and the CNI plugins of /usr/lib/cni), so its
// pods are real containers with their own root filesystems, pulled images,
// cgroup limits and network namespaces.
//
// Several nodes share the machine without sharing state. Node name keeps
// everything under NodeDir(stateDir, name):
//
//	containerd.toml      containerd's configuration (CRI plugin included)
//	certs.d/<registry>/  hosts.toml sending pulls to Config.Registry (and
//	                     certs.d/_default/ for any other registry)
//	containerd/          containerd's root: images, snapshots, metadata (kept)
//	run/                 containerd's state (tasks, runc state, pod network
//	                     namespaces), its sockets and the IPAM data: made
//	                     anew at every boot, as a tmpfs /run is
//	cni/net.d/           the pod network: a bridge per node, host-local IPAM
//	kubelet/             the kubelet's --root-dir (kept)
//	kubelet.yaml         KubeletConfiguration; kubeconfig, resolv.conf beside it
//	pod-logs/            container logs (the kubelet's podLogsDir)
//
// and the logs in <stateDir>/logs/<name>-containerd.log and
// <name>-kubelet.log. Every process of the node (containerd, its shims,
// the containers, the kubelet) lives in one cgroup tree, CgroupRoot, which
// is also the kubelet's --cgroup-root: losing the node kills that tree,
// and Sweep finds it again after the plane itself was killed.
//
// The node's pods attach to a bridge of its own (podnet.Network.AddBridge)
// whose address is the node's IP; they route to the other pods, to
// ClusterIPs (kube-proxy) and to the cluster DNS through it.
package realnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis-operator/redis-operator/test/localplane/internal/pki"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
	"github.com/redis-operator/redis-operator/test/localplane/internal/proctree"
)

const (
	// SandboxImage is the pod sandbox image containerd runs for every pod,
	// pulled like any other image.
	SandboxImage = "registry.k8s.io/pause:3.10"
	// ClusterDomain is the DNS domain the kubelet gives pods.
	ClusterDomain = "cluster.local"
)

// MirroredRegistries are the registries whose images every real node pulls
// from Config.Registry instead, under the same repository path (docker.io's
// redis:7.0 is <registry>/v2/library/redis/manifests/7.0). Images of any
// other registry are looked for there too (example.com/app:1 as
// <registry>/v2/app/manifests/1): no pull leaves the machine.
var MirroredRegistries = []string{"docker.io", "registry.k8s.io", "ghcr.io", "quay.io"}

// Config configures a real node.
type Config struct {
	// Name of the Node object, also its kubernetes.io/hostname label.
	Name string
	// Zone, when set, is its topology.kubernetes.io/zone label.
	Zone string
	// StateDir is the plane's state directory (absolute); the node lives in
	// NodeDir(StateDir, Name).
	StateDir string
	// BinDir holds kubelet.
	BinDir string
	// APIServer is the API server's URL as the kubelet reaches it
	// (https://127.0.0.1:<port>).
	APIServer string
	// PKI holds the plane's CA (Ensure done); the node's client and serving
	// certificates are made there.
	PKI pki.Files
	// Network is the plane's pod network: the node's bridge comes from it,
	// and its gateway is the pods' DNS server.
	Network *podnet.Network
	// Registry is the host:port of the OCI registry, served over plain
	// HTTP, that MirroredRegistries are pulled from. Required.
	Registry string
	Log      *slog.Logger
}

// Node is a running real node.
type Node struct {
	cfg        Config
	containerd *proctree.Process
	kubelet    *proctree.Process
	stop       sync.Once
}

// NodeDir is where node name of the plane in stateDir keeps its state.
func NodeDir(stateDir, name string) string { return filepath.Join(stateDir, "nodes", name) }

// runDir is the node's boot-scoped state (containerd's state, sockets,
// IPAM), emptied at every boot.
func runDir(nodeDir string) string { return filepath.Join(nodeDir, "run") }

// maxNodeDir bounds NodeDir's length: the sockets below it (the kubelet's
// <root-dir>/device-plugins/kubelet.sock, containerd's) must fit in a unix
// socket address (108 bytes).
const maxNodeDir = 72

// Start boots node cfg.Name: sweeps what an earlier boot left (processes,
// mounts, namespaces), takes its bridge, writes its configuration, starts
// containerd and then the kubelet, and returns once the kubelet answers
// its health check. The kubelet registers the Node (or takes over the
// existing one, whose pods it starts again); the Node becomes Ready
// shortly after. Errors name the log to read; on error nothing is left
// running.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Name == "" || cfg.StateDir == "" || cfg.BinDir == "" || cfg.APIServer == "" || cfg.Network == nil ||
		cfg.Registry == "" || cfg.Log == nil {
		return nil, errors.New("realnode: Name, StateDir, BinDir, APIServer, Network, Registry and Log are required")
	}
	dir := NodeDir(cfg.StateDir, cfg.Name)
	if len(dir) > maxNodeDir {
		return nil, fmt.Errorf("realnode: %s is longer than %d bytes: the node's sockets would not fit; use a shorter state directory", dir, maxNodeDir)
	}
	if _, err := os.Stat(filepath.Join(cfg.BinDir, "kubelet")); err != nil {
		return nil, fmt.Errorf("realnode: kubelet not found in %s (build it with `make tools`): %w", cfg.BinDir, err)
	}
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "iptables", "mount"} {
		if !inPath(bin) {
			return nil, fmt.Errorf("realnode: %s not found in %s (Debian packages containerd, runc, iptables, mount)", bin, binPath)
		}
	}
	if err := Sweep(cfg.StateDir, cfg.Name); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg}
	ok := false
	defer func() {
		if !ok {
			n.Crash()
		}
	}()
	bridge, err := cfg.Network.AddBridge(cfg.Name)
	if err != nil {
		return nil, err
	}
	if err := cfg.PKI.EnsureNode(cfg.Name, []net.IP{net.ParseIP(bridge.Gateway)}); err != nil {
		return nil, fmt.Errorf("realnode: certificates: %w", err)
	}
	cg, err := makeCgroups(cgroupRoot(cfg.StateDir, cfg.Name))
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(bridge.Gateway)
	if err != nil {
		return nil, err
	}
	files, err := writeConfig(cfg, bridge, ports)
	if err != nil {
		return nil, fmt.Errorf("realnode: writing the configuration: %w", err)
	}
	if n.containerd, err = n.run(cg.procs("containerd"), "containerd", "containerd", "--config", files.containerdConfig); err != nil {
		return nil, err
	}
	if err := waitSocket(ctx, n.containerd, files.containerdSocket, "containerd", n.logPath("containerd")); err != nil {
		return nil, err
	}
	if n.kubelet, err = n.run(cg.procs("kubelet"), "kubelet", filepath.Join(cfg.BinDir, "kubelet"), files.kubeletArgs...); err != nil {
		return nil, err
	}
	if err := waitHealthy(ctx, n.kubelet, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports.healthz), n.logPath("kubelet")); err != nil {
		return nil, err
	}
	ok = true
	return n, nil
}

func (n *Node) logPath(component string) string {
	return filepath.Join(n.cfg.StateDir, "logs", n.cfg.Name+"-"+component+".log")
}

// run starts bin with args as component, moved into the cgroup whose
// cgroup.procs is procs before it runs (a shell writes its own pid there,
// then execs), with its output appended to the component's log.
func (n *Node) run(procs, component, bin string, args ...string) (*proctree.Process, error) {
	log, err := os.OpenFile(n.logPath(component), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, procs, bin}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "PATH="+binPath)
	p, err := proctree.Start(pidDir(n.cfg.StateDir, n.cfg.Name), component, cmd)
	if err != nil {
		return nil, fmt.Errorf("realnode: %w", err)
	}
	return p, nil
}

// binPath is the PATH containerd and the kubelet run with: containerd
// finds its shim and runc there, the kubelet mount and iptables.
const binPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func inPath(name string) bool {
	for _, dir := range filepath.SplitList(binPath) {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil && !st.IsDir() {
			return true
		}
	}
	return false
}

// pidDir is where the node's kubelet and containerd are recorded, under
// the plane's run directory (so the plane's own sweep kills them too).
func pidDir(stateDir, name string) string { return filepath.Join(stateDir, "run", "nodes", name) }

// Crash makes the node fail as a machine that lost power: every process in
// its cgroup tree (containerd, shims, containers, kubelet) gets SIGKILL at
// once; then its mounts, pod network namespaces, runtime state and bridge
// are removed, as a reboot would find them. Images, the kubelet's root
// directory and container logs stay. The Node and its pods stay in the
// API; the node lifecycle controller marks them after its grace period.
// Crash after Crash or Stop does nothing.
func (n *Node) Crash() { n.halt(0) }

// Stop shuts the node down: SIGTERM to every container process, SIGKILL to
// whatever is left after grace, then as Crash (nothing of the node keeps
// running, its bridge is gone). The pod objects stay in the API.
func (n *Node) Stop(grace time.Duration) { n.halt(grace) }

func (n *Node) halt(grace time.Duration) {
	n.stop.Do(func() {
		root := cgroupRoot(n.cfg.StateDir, n.cfg.Name)
		if grace > 0 {
			if n.kubelet != nil {
				n.kubelet.Signal(syscall.SIGKILL)
			}
			terminate(root+"/kubepods", grace)
		}
		if err := killTree(root); err != nil {
			n.cfg.Log.Error("Killing the node's processes", "err", err)
		}
		for _, p := range []*proctree.Process{n.kubelet, n.containerd} {
			if p != nil {
				p.Signal(syscall.SIGKILL)
				<-p.Done()
			}
		}
		if err := cleanup(n.cfg.StateDir, n.cfg.Name); err != nil {
			n.cfg.Log.Error("Cleaning up after the node", "err", err)
		}
		if err := n.cfg.Network.RemoveBridge(n.cfg.Name); err != nil {
			n.cfg.Log.Error("Removing the node's bridge", "err", err)
		}
	})
}

// Sweep kills whatever node name of the plane in stateDir left running
// (after the plane was killed, or a lost node) and removes its mounts,
// namespaces and runtime state, as Crash does, but leaves its bridge to
// the pod network's own sweep (podnet.Open). A node that never ran is no
// error.
func Sweep(stateDir, name string) error {
	if err := killTree(cgroupRoot(stateDir, name)); err != nil {
		return err
	}
	if _, err := proctree.Sweep(pidDir(stateDir, name)); err != nil {
		return fmt.Errorf("realnode: %w", err)
	}
	return cleanup(stateDir, name)
}

// SweepAll runs Sweep for every node that has a directory under stateDir.
func SweepAll(stateDir string) error {
	entries, err := os.ReadDir(filepath.Join(stateDir, "nodes"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, Sweep(stateDir, e.Name()))
		}
	}
	return errors.Join(errs...)
}

type ports struct{ kubelet, healthz int }

// freePorts picks the kubelet's port on the node IP and its health port on
// 127.0.0.1, both free now.
func freePorts(nodeIP string) (ports, error) {
	var p ports
	for addr, port := range map[string]*int{nodeIP: &p.kubelet, "127.0.0.1": &p.healthz} {
		l, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
		if err != nil {
			return p, fmt.Errorf("realnode: finding a free port: %w", err)
		}
		*port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	return p, nil
}

// waitSocket waits until the unix socket path accepts connections.
func waitSocket(ctx context.Context, p *proctree.Process, path, name, log string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("realnode: %s exited while starting (%v); see %s", name, p.Err(), log)
		case <-ctx.Done():
			return fmt.Errorf("realnode: %s not serving on %s; see %s: %w", name, path, log, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitHealthy waits until url answers 200.
func waitHealthy(ctx context.Context, p *proctree.Process, url, log string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = "status " + strconv.Itoa(resp.StatusCode)
		} else {
			last = err.Error()
		}
		select {
		case <-p.Done():
			return fmt.Errorf("realnode: kubelet exited while starting (%v); see %s", p.Err(), log)
		case <-ctx.Done():
			return fmt.Errorf("realnode: kubelet not healthy (%s); see %s: %w", last, log, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
