// Package localplane runs a single-machine Kubernetes whose pods are local
// processes: etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler on 127.0.0.1 (see internal/controlplane) and process
// nodes (see internal/node; three by default, one per zone) that each
// give their pods their own
// 127.x.y.z address (or, with Options.PodNetwork, its own network
// namespace, with kube-proxy and a cluster DNS; see internal/podnet), runs its containers as processes with their volumes
// mounted at their container paths, and provisions a directory-backed
// PersistentVolume for every claim. With Options.RealNodes, real nodes
// (the kubelet against containerd; see internal/realnode) join them.
//
// It needs root, util-linux (nsenter, setpriv, mount), and the binaries
// etcd, kube-apiserver and kube-controller-manager (built into bin/ by
// `make tools`). Pods of images whose repository ends in redis or valkey
// run /usr/bin/redis-server (Debian redis-server); redis_exporter images
// run prometheus-redis-exporter.
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
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/redis-operator/redis-operator/test/localplane/internal/controlplane"
	"github.com/redis-operator/redis-operator/test/localplane/internal/images"
	"github.com/redis-operator/redis-operator/test/localplane/internal/node"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
	"github.com/redis-operator/redis-operator/test/localplane/internal/realnode"
)

// DefaultNodeName is the name of the process node, or the prefix of the
// nodes' names when there are several (DefaultNodeName-1, -2, ...).
const DefaultNodeName = "localplane"

// DefaultNodes is how many process nodes a plane has unless
// Options.Nodes says otherwise.
const DefaultNodes = 3

// Zones are the topology.kubernetes.io/zone labels of the nodes, given in
// turn: node i is in Zones[i%len(Zones)].
var Zones = []string{"zone-a", "zone-b", "zone-c"}

// Options configure Start.
type Options struct {
	// StateDir holds everything the plane writes (certificates, etcd data,
	// logs, claim volumes); it is created if missing and reused if it
	// holds an earlier plane's state (the API objects and volume data are
	// then still there). Required.
	StateDir string
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	// Required.
	BinDir string
	// NodeName names the process node, or prefixes the names of several
	// (NodeName-1, ...); DefaultNodeName when empty.
	NodeName string
	// Nodes is how many process nodes to run; with one, it is named
	// NodeName and has no zone label. Zero is DefaultNodes, or none with
	// RealNodes: a plane of real nodes only.
	Nodes int
	// StartTimeout bounds the start of each part; 2 minutes when zero.
	StartTimeout time.Duration
	// PodNetwork gives every pod its own network namespace with an IP in
	// podnet.PodCIDR, runs kube-proxy (bin/kube-proxy) so ClusterIPs in
	// podnet.ServiceCIDR route, and serves cluster DNS to pods (see package
	// podnet). Without it pods share the machine's network stack.
	PodNetwork bool
	// RealNodes is how many real nodes to run besides the process nodes:
	// NodeName-c1, -c2, ..., in Zones in turn, each the real kubelet
	// (bin/kubelet) with a containerd of its own (see package realnode).
	// They are labelled realnode.RuntimeLabel=containerd and, beside
	// process nodes, tainted with it (NoSchedule): only pods that tolerate
	// the taint run there; without process nodes any pod does. Needs
	// PodNetwork. The API server then runs the Node authorizer and
	// NodeRestriction, and the kubernetes Service routes to it.
	RealNodes int
	// Registry is the host:port of the OCI registry (plain HTTP) the real
	// nodes pull images of realnode.MirroredRegistries from. When empty,
	// the plane runs bin/registry (read-only) on the per-user images cache
	// that `make images` fills (package images), and Start fails if that
	// has no sandbox image.
	Registry string
}

// PodNetworkEnv, set to 0, turns the pod network off in `localplane up`
// (and in this module's tests), where it is on by default.
const PodNetworkEnv = "LOCALPLANE_PODNET"

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
	// NodeName is the name of the first process node (empty without).
	NodeName string
	// Nodes are the names of all process nodes, in order.
	Nodes []string
	// RealNodes are the names of the real nodes (Options.RealNodes), in
	// order.
	RealNodes []string
	// DNS is the cluster DNS server's address (host:53) with
	// Options.PodNetwork, reachable from pods and the host; empty without.
	DNS string

	cp       *controlplane.ControlPlane
	network  *podnet.Network
	services *node.Services
	registry *images.Registry // the one the plane runs for its real nodes, or nil
	logFile  *os.File

	ctx    context.Context // Start's, which bounds the nodes' lives
	mu     sync.Mutex
	nodes  map[string]*node.Node // running (not lost) nodes
	config map[string]node.Config
	// real nodes, running (not lost) and all
	real       map[string]*realnode.Node
	realConfig map[string]realnode.Config
}

// Start runs the control plane, the process nodes and the real nodes and
// returns once the nodes are Ready and schedulable and pods can be created
// in the default namespace (its service account exists). Processes of an
// earlier plane with the same StateDir that crashed are killed first (real
// nodes' containers, mounts and namespaces included). Component logs are
// in <StateDir>/logs. On error everything started is stopped.
func Start(ctx context.Context, o Options) (*Plane, error) {
	if o.StateDir == "" || o.BinDir == "" {
		return nil, errors.New("localplane: StateDir and BinDir are required")
	}
	if o.NodeName == "" {
		o.NodeName = DefaultNodeName
	}
	if o.Nodes == 0 && o.RealNodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	if o.RealNodes > 0 && !o.PodNetwork {
		return nil, errors.New("localplane: RealNodes need PodNetwork")
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
	logFile, err := os.OpenFile(filepath.Join(controlplane.LogDir(stateDir), "node.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("localplane: %w", err)
	}
	redirectKlog(logFile)
	p := &Plane{StateDir: stateDir, logFile: logFile, nodes: map[string]*node.Node{}, config: map[string]node.Config{},
		real: map[string]*realnode.Node{}, realConfig: map[string]realnode.Config{}, ctx: ctx}
	zones := make([]string, o.Nodes)
	if o.Nodes == 1 {
		p.Nodes = []string{o.NodeName}
	} else {
		for i := range o.Nodes {
			p.Nodes = append(p.Nodes, fmt.Sprintf("%s-%d", o.NodeName, i+1))
			zones[i] = Zones[i%len(Zones)]
		}
	}
	for i := range o.RealNodes {
		p.RealNodes = append(p.RealNodes, fmt.Sprintf("%s-c%d", o.NodeName, i+1))
	}
	// kube-proxy serves the first node.
	proxyNode := append(slices.Clone(p.Nodes), p.RealNodes...)[0]
	if len(p.Nodes) > 0 {
		p.NodeName = p.Nodes[0]
	}
	ok := false
	defer func() {
		if !ok {
			p.Stop()
		}
	}()

	// Real nodes of an earlier run that crashed, before their bridges go
	// with the pod network's sweep.
	if err := realnode.SweepAll(stateDir); err != nil {
		return nil, fmt.Errorf("localplane: sweeping the real nodes of an earlier run: %w", err)
	}
	cpOpts := controlplane.Options{StateDir: stateDir, BinDir: binDir, StartTimeout: o.StartTimeout, Nodes: o.Nodes}
	if o.PodNetwork {
		if p.network, err = podnet.Open(stateDir); err != nil {
			return nil, err
		}
		cpOpts.ServiceCIDR, cpOpts.KubeProxy, cpOpts.NodeName = podnet.ServiceCIDR, podnet.PodCIDR, proxyNode
		cpOpts.ServingIPs = []net.IP{net.ParseIP(p.network.Gateway)}
		p.DNS = net.JoinHostPort(p.network.Gateway, "53")
	}
	if o.RealNodes > 0 {
		// Kubelets with identities of their own; pods that find the API
		// server at the kubernetes Service's ClusterIP (kube-proxy sends
		// it to the relay on the gateway).
		cpOpts.NodeAuthorization, cpOpts.AdvertiseAddress = true, p.network.Gateway
	}
	p.cp, err = controlplane.Start(ctx, cpOpts)
	if err != nil {
		return nil, err
	}
	p.Kubeconfig, p.RESTConfig = p.cp.Kubeconfig, p.cp.RESTConfig
	if p.Client, err = kubernetes.NewForConfig(p.RESTConfig); err != nil {
		return nil, err
	}
	nodeConfig, err := clientcmd.BuildConfigFromFlags("", p.cp.NodeKubeconfig)
	if err != nil {
		return nil, err
	}
	nodeConfig.QPS, nodeConfig.Burst = 50, 100
	nodeClient, err := kubernetes.NewForConfig(nodeConfig)
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(logFile, nil))
	p.services, err = node.StartServices(ctx, node.ServicesConfig{StateDir: stateDir, Client: nodeClient,
		APIPort: p.cp.Ports.APIServer, Network: p.network, Log: log})
	if err != nil {
		return nil, err
	}
	for i, name := range p.Nodes {
		p.config[name] = node.Config{
			Name: name, Zone: zones[i], StateDir: stateDir, Client: nodeClient,
			APIHost: "127.0.0.1", APIPort: p.cp.Ports.APIServer, KubeletPort: p.cp.Ports.KubeletPort(i),
			PKI: p.cp.PKI, BinDir: binDir, Network: p.network, Log: log.With("node", name),
		}
	}
	if o.RealNodes > 0 && o.Registry == "" {
		if o.Registry, err = p.startRegistry(ctx, binDir); err != nil {
			return nil, err
		}
	}
	for i, name := range p.RealNodes {
		p.realConfig[name] = realnode.Config{
			Name: name, Zone: Zones[i%len(Zones)], StateDir: stateDir, BinDir: binDir,
			APIServer: fmt.Sprintf("https://127.0.0.1:%d", p.cp.Ports.APIServer), PKI: p.cp.PKI,
			Network: p.network, Registry: o.Registry, Tainted: o.Nodes > 0, Log: log.With("node", name),
		}
	}
	if err := p.deleteOtherNodes(ctx); err != nil {
		return nil, err
	}
	for _, name := range append(slices.Clone(p.Nodes), p.RealNodes...) {
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
	if err := p.setRuntimeTaints(ctx, o.Nodes > 0); err != nil {
		return nil, err
	}
	ok = true
	return p, nil
}

// startRegistry runs the registry of the per-user images cache for the
// real nodes and returns its host:port, once it serves the sandbox image.
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
		if slices.Contains(p.Nodes, n.Name) || slices.Contains(p.RealNodes, n.Name) {
			continue
		}
		if err := p.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("localplane: deleting node %s of an earlier run: %w", n.Name, err)
		}
		fmt.Fprintf(p.logFile, "localplane: deleted node %s, which this plane does not have\n", n.Name)
	}
	return nil
}

// setRuntimeTaints gives every real node the taint
// realnode.RuntimeLabel=containerd:NoSchedule, or takes it away without
// tainted. The kubelet registers a new Node with it or without
// (realnode.Config.Tainted) but leaves an existing Node's taints alone:
// an earlier run in the same state directory may have had process nodes
// or not.
func (p *Plane) setRuntimeTaints(ctx context.Context, tainted bool) error {
	for _, name := range p.RealNodes {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := p.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if slices.ContainsFunc(n.Spec.Taints, realnode.IsRuntimeTaint) == tainted {
				return nil
			}
			if tainted {
				n.Spec.Taints = append(n.Spec.Taints, realnode.RuntimeTaint)
			} else {
				n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, realnode.IsRuntimeTaint)
			}
			_, err = p.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("localplane: the taints of node %s: %w", name, err)
		}
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

// Stop stops every pod (SIGTERM, SIGKILL after 10 s) and the real nodes'
// kubelets and containerd, then the controller manager, the API server
// and etcd, leaving no process, mount or network namespace behind. The
// state directory stays. Stop is idempotent.
func (p *Plane) Stop() {
	p.mu.Lock()
	var wg sync.WaitGroup
	for name, n := range p.nodes {
		wg.Go(func() { n.Stop(10 * time.Second) })
		delete(p.nodes, name)
	}
	for name, n := range p.real {
		wg.Go(func() { n.Stop(10 * time.Second) })
		delete(p.real, name)
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

// redirectKlog sends client-go's klog output to the node log instead of
// stderr.
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
		if err == nil && pending == 0 && len(nodes.Items) >= len(p.Nodes)+len(p.RealNodes) {
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
