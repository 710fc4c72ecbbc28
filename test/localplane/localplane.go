// Package localplane runs a single-machine Kubernetes of real nodes:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
// kube-proxy on 127.0.0.1 (see internal/controlplane), and nodes that each
// run the real kubelet against a containerd of their own (see
// internal/realnode; three by default, one per zone), on a pod network of
// node bridges routed by the host (see internal/podnet). Beside them run
// what a real cluster's add-ons provide: a cluster DNS, a provisioner of
// directory-backed PersistentVolumes, and a relay to the API server for
// pods; and, unless Options.Registry names another, the OCI registry the
// nodes pull every image from (see internal/images).
//
// It needs root, the Debian packages containerd, runc, iptables, iproute2
// and the CNI plugins, the binaries of `make tools` (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kube-proxy, kubelet, registry)
// and the images of `make images`.
package localplane

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/redis-operator/redis-operator/test/localplane/internal/controlplane"
	"github.com/redis-operator/redis-operator/test/localplane/internal/images"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
	"github.com/redis-operator/redis-operator/test/localplane/internal/realnode"
	"github.com/redis-operator/redis-operator/test/localplane/internal/services"
)

// DefaultNodeName prefixes the nodes' names: DefaultNodeName-1, -2, ...
const DefaultNodeName = "localplane"

// DefaultNodes is how many nodes a plane has unless Options.Nodes says
// otherwise.
const DefaultNodes = 3

// Zones are the topology.kubernetes.io/zone labels of the nodes, given in
// turn: node i (0-based) is in Zones[i%len(Zones)].
var Zones = []string{"zone-a", "zone-b", "zone-c"}

// Options configure Start.
type Options struct {
	// StateDir holds everything the plane writes (certificates, etcd data,
	// logs, the nodes' state, claim volumes); it is created if missing and
	// reused if it holds an earlier plane's state (the API objects, images
	// and volume data are then still there). Its path must be short enough
	// for the nodes' sockets (realnode.Start says how long). Required.
	StateDir string
	// BinDir holds the binaries of `make tools`. Required.
	BinDir string
	// NodeName prefixes the names of the nodes (NodeName-1, ...);
	// DefaultNodeName when empty.
	NodeName string
	// Nodes is how many nodes to run (at most 63, the node bridges
	// podnet has room for, shared by every plane on the machine); zero is
	// DefaultNodes. Each is the real kubelet (bin/kubelet) with a
	// containerd of its own, in Zones in turn.
	Nodes int
	// StartTimeout bounds the start of each part; 2 minutes when zero.
	StartTimeout time.Duration
	// Registry is the host:port of the OCI registry (plain HTTP) the nodes
	// pull images of realnode.MirroredRegistries from. When empty, the
	// plane runs bin/registry (read-only) on the per-user images cache
	// that `make images` fills (package images), and Start fails if that
	// has no sandbox image.
	Registry string
}

// Plane is a running local plane.
type Plane struct {
	// StateDir is the absolute state directory.
	StateDir string
	// Kubeconfig is the path of an admin (system:masters) kubeconfig,
	// <StateDir>/kubeconfig.
	Kubeconfig string
	// RESTConfig is the admin client configuration.
	RESTConfig *rest.Config
	// Client is an admin clientset.
	Client kubernetes.Interface
	// Nodes are the names of the nodes, in order.
	Nodes []string
	// DNS is the cluster DNS server's address (<gateway>:53), reachable
	// from pods and the host.
	DNS string

	cp       *controlplane.ControlPlane
	network  *podnet.Network
	services *services.Running
	registry *images.Registry // the one the plane runs for its nodes, or nil
	logFile  *os.File         // logs/localplane.log: the plane's, its services' and client-go's messages

	ctx    context.Context // Start's, which bounds the nodes' lives
	mu     sync.Mutex
	nodes  map[string]*realnode.Node // running (not lost) nodes
	config map[string]realnode.Config
}

// Start runs the control plane, the plane's services and the nodes and
// returns once the nodes are Ready and schedulable and pods can be created
// in the default namespace (its service account exists). What an earlier
// plane with the same StateDir that was killed left running is killed
// first (the nodes' containers, mounts and bridges included), and the Node
// objects of an earlier run's nodes that this plane does not have are
// deleted. Component logs are in <StateDir>/logs. Errors name the part
// that failed and, where there is one, the log to read; on error
// everything started is stopped.
func Start(ctx context.Context, o Options) (*Plane, error) {
	if o.StateDir == "" || o.BinDir == "" {
		return nil, errors.New("localplane: StateDir and BinDir are required")
	}
	if o.Nodes < 0 {
		return nil, fmt.Errorf("localplane: Nodes is %d", o.Nodes)
	}
	if o.NodeName == "" {
		o.NodeName = DefaultNodeName
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	stateDir, err := filepath.Abs(o.StateDir)
	if err != nil {
		return nil, err
	}
	binDir, err := filepath.Abs(o.BinDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(controlplane.LogDir(stateDir), 0o700); err != nil {
		return nil, fmt.Errorf("localplane: %w", err)
	}
	logFile, err := os.OpenFile(filepath.Join(controlplane.LogDir(stateDir), "localplane.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localplane: %w", err)
	}
	redirectKlog(logFile)
	p := &Plane{StateDir: stateDir, logFile: logFile, nodes: map[string]*realnode.Node{}, config: map[string]realnode.Config{}, ctx: ctx}
	for i := range o.Nodes {
		p.Nodes = append(p.Nodes, fmt.Sprintf("%s-%d", o.NodeName, i+1))
	}
	ok := false
	defer func() {
		if !ok {
			p.Stop()
		}
	}()

	// The nodes of an earlier run that was killed, before their bridges
	// go with the pod network's sweep.
	if err := realnode.SweepAll(stateDir); err != nil {
		return nil, fmt.Errorf("localplane: sweeping the nodes of an earlier run: %w", err)
	}
	if p.network, err = podnet.Open(stateDir); err != nil {
		return nil, err
	}
	p.DNS = net.JoinHostPort(p.network.Gateway, "53")
	// Pods find the API server at the kubernetes Service's ClusterIP:
	// kube-proxy (which serves the first node) sends it to the gateway,
	// where the services' relay forwards it to 127.0.0.1.
	p.cp, err = controlplane.Start(ctx, controlplane.Options{StateDir: stateDir, BinDir: binDir, StartTimeout: o.StartTimeout,
		ServiceCIDR: podnet.ServiceCIDR, ClusterCIDR: podnet.PodCIDR, ProxyNode: p.Nodes[0], AdvertiseAddress: p.network.Gateway})
	if err != nil {
		return nil, err
	}
	p.Kubeconfig, p.RESTConfig = p.cp.Kubeconfig, p.cp.RESTConfig
	if p.Client, err = kubernetes.NewForConfig(p.RESTConfig); err != nil {
		return nil, err
	}
	servicesConfig := rest.CopyConfig(p.RESTConfig)
	servicesConfig.QPS, servicesConfig.Burst = 50, 100
	servicesClient, err := kubernetes.NewForConfig(servicesConfig)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(logFile, nil))
	p.services, err = services.Start(ctx, services.Config{StateDir: stateDir, Client: servicesClient,
		APIPort: p.cp.Ports.APIServer, Network: p.network, Log: log})
	if err != nil {
		return nil, err
	}
	if o.Registry == "" {
		if o.Registry, err = p.startRegistry(ctx, binDir); err != nil {
			return nil, err
		}
	}
	for i, name := range p.Nodes {
		p.config[name] = realnode.Config{
			Name: name, Zone: Zones[i%len(Zones)], StateDir: stateDir, BinDir: binDir,
			APIServer: fmt.Sprintf("https://127.0.0.1:%d", p.cp.Ports.APIServer), PKI: p.cp.PKI,
			Network: p.network, Registry: o.Registry, Log: log.With("node", name),
		}
	}
	if err := p.deleteOtherNodes(ctx); err != nil {
		return nil, err
	}
	for _, name := range p.Nodes {
		if err := p.RestoreNode(name); err != nil {
			return nil, err
		}
	}
	if err := p.waitServiceAccount(ctx, o.StartTimeout); err != nil {
		return nil, err
	}
	if err := p.waitNodesSchedulable(ctx, o.StartTimeout); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// startRegistry runs the registry of the per-user images cache for the
// nodes and returns its host:port, once it serves the sandbox image.
func (p *Plane) startRegistry(ctx context.Context, binDir string) (string, error) {
	cache, err := images.Dir()
	if err != nil {
		return "", fmt.Errorf("localplane: %w", err)
	}
	p.registry, err = images.StartRegistry(ctx, binDir, filepath.Join(cache, "registry"),
		filepath.Join(controlplane.LogDir(p.StateDir), "registry.log"), false)
	if err != nil {
		return "", fmt.Errorf("localplane: %w", err)
	}
	repo, tag, _ := strings.Cut(strings.TrimPrefix(realnode.SandboxImage, "registry.k8s.io/"), ":")
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, "http://"+p.registry.Addr+"/v2/"+repo+"/manifests/"+tag, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("localplane: the images registry: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("localplane: the images registry in %s has no %s (status %d): run `make images`", cache, realnode.SandboxImage, resp.StatusCode)
	}
	return p.registry.Addr, nil
}

// localPlaneLabel is the label, with value true, of every node of a local
// plane.
const localPlaneLabel = "node.kubernetes.io/local-plane"

// deleteOtherNodes deletes the Node objects of the local plane
// (node.kubernetes.io/local-plane=true) that are not nodes of this plane:
// an earlier run in the same state directory had other nodes. As when a
// cloud removes a machine, the pod garbage collector then deletes their
// pods and their controllers start them elsewhere.
func (p *Plane) deleteOtherNodes(ctx context.Context) error {
	nodes, err := p.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: localPlaneLabel + "=true"})
	if err != nil {
		return fmt.Errorf("localplane: %w", err)
	}
	for _, n := range nodes.Items {
		if slices.Contains(p.Nodes, n.Name) {
			continue
		}
		if err := p.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("localplane: deleting node %s of an earlier run: %w", n.Name, err)
		}
		fmt.Fprintf(p.logFile, "localplane: deleted node %s, which this plane does not have\n", n.Name)
	}
	return nil
}

// waitServiceAccount waits for the controller manager to create the
// default service account, without which the API rejects pods.
func (p *Plane) waitServiceAccount(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		_, err := p.Client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) && ctx.Err() == nil {
			return fmt.Errorf("localplane: %w", err)
		}
		if exited := p.cp.Exited(); exited != nil {
			return fmt.Errorf("localplane: %w", exited)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localplane: default service account not created (is kube-controller-manager running? see %s): %w",
				controlplane.LogDir(p.StateDir), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Err reports a control-plane component that exited on its own, or nil.
func (p *Plane) Err() error {
	if p.cp == nil {
		return nil
	}
	return p.cp.Exited()
}

// Stop stops the nodes (their kubelets, then every container: SIGTERM,
// SIGKILL after 10 s; then containerd), the plane's services and
// registry, then the control plane (kube-proxy, whose rules go, the
// scheduler, the controller manager, the API server and etcd), leaving no
// process, mount, network namespace or node bridge behind. The state directory stays.
// Stop is idempotent.
func (p *Plane) Stop() {
	p.mu.Lock()
	var wg sync.WaitGroup
	for name, n := range p.nodes {
		wg.Go(func() { n.Stop(10 * time.Second) })
		delete(p.nodes, name)
	}
	p.mu.Unlock()
	wg.Wait()
	if p.services != nil {
		p.services.Stop()
		p.services = nil
	}
	if p.registry != nil {
		p.registry.Stop()
		p.registry = nil
	}
	if p.cp != nil {
		p.cp.Stop()
		p.cp = nil
	}
	if p.network != nil {
		if err := p.network.Close(); err != nil {
			fmt.Fprintln(p.logFile, "localplane: closing the pod network:", err)
		}
		p.network = nil
	}
	if p.logFile != nil {
		p.logFile.Close()
		p.logFile = nil
	}
}

// redirectKlog sends client-go's klog output to the plane's log instead
// of stderr.
func redirectKlog(w *os.File) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	_ = fs.Set("stderrthreshold", "FATAL")
	klog.SetOutput(w)
}

// waitNodesSchedulable waits until no node carries the not-ready taint
// that the API server's TaintNodesByCondition admission puts on a new
// Node and the node lifecycle controller lifts once the node is Ready.
func (p *Plane) waitNodesSchedulable(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		nodes, err := p.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		pending := 0
		if err == nil {
			for _, n := range nodes.Items {
				for _, t := range n.Spec.Taints {
					if t.Key == corev1.TaintNodeNotReady {
						pending++
					}
				}
			}
		}
		if err == nil && pending == 0 && len(nodes.Items) >= len(p.Nodes) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("localplane: nodes still tainted %s (is the node lifecycle controller running? see %s): %w",
				corev1.TaintNodeNotReady, controlplane.LogDir(p.StateDir), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
