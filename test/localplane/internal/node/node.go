// Package node is the process node of the local plane: a Kubernetes node
// whose pods run as local processes. virtual-kubelet
// (github.com/virtual-kubelet/virtual-kubelet) registers the Node, keeps
// its lease, feeds pod events to this package's provider and writes pod
// statuses back; this package runs the pods. A plane runs several nodes
// in one process (each its own Node object, lease and pods; kube-scheduler
// places pods on them) and one Services: the volume provisioner, the
// API relay and the cluster DNS, which outlive any node.
//
// Each pod gets its own address in 127.64.0.0/10, or, with a pod network
// (Config.Network), its own network namespace and an address in
// podnet.PodCIDR; its containers and execs then run in that namespace,
// with the cluster DNS in their /etc/resolv.conf. Each container is a
// process (tree) in its own mount and UTS namespaces, with the pod's
// volumes bind-mounted at their container paths, run as the pod's user.
// Image references map to local binaries (see LookupImage).
//
// Differences from a real node that matter to workloads: without a pod
// network there is no network namespace, so a process must bind its pod
// IP (binding 0.0.0.0 takes the port on every pod address); there is no
// DNS, ClusterIPs do not route, and Endpoints/EndpointSlices stay empty (the API rejects loopback
// endpoint addresses); CPU and memory limits are not enforced; the
// scheduler ignores affinity, topology spread and taints (there is one
// node).
package node

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	vkslog "github.com/virtual-kubelet/virtual-kubelet/log/slog"
	vknode "github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/redis-operator/redis-operator/test/localplane/internal/pki"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
)

// Config configures a process node.
type Config struct {
	// Name of the Node object (also its kubernetes.io/hostname label).
	Name string
	// Zone, when set, is the node's topology.kubernetes.io/zone label.
	Zone string
	// StateDir holds pods/ (per-pod directories and logs) and volumes/
	// (claim data, kept across pod restarts).
	StateDir string
	Client   kubernetes.Interface
	// APIHost and APIPort are the API server's address, given to pods as
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
	APIHost string
	APIPort int
	// KubeletPort is where the node serves logs and exec to the API server.
	KubeletPort int
	// PKI supplies the serving certificate and the CA that client
	// certificates must chain to.
	PKI pki.Files
	// BinDir holds redis-operator, which the operator's image runs
	// (LookupImage).
	BinDir string
	// Network, when set, gives every pod its own network namespace and an
	// IP from it (see package podnet); pods then reach the API server
	// through the relay Services runs on the network's gateway. When nil,
	// pods share the machine's network stack with addresses in
	// 127.64.0.0/10.
	Network *podnet.Network
	Log     *slog.Logger
}

// Node is a running process node.
type Node struct {
	ctx      context.Context
	cancel   context.CancelFunc
	client   kubernetes.Interface
	log      *slog.Logger
	stateDir string
	binDir   string
	name     string
	hostIP   string
	network  *podnet.Network
	env      *envResolver

	configMaps corev1listers.ConfigMapLister
	secrets    corev1listers.SecretLister
	podLister  corev1listers.PodLister

	events   record.EventBroadcaster
	recorder record.EventRecorder

	mu       sync.Mutex
	pods     map[string]*podRuntime    // running pods by namespace/name
	dying    map[types.UID]*podRuntime // pods being stopped
	notifyCb func(*corev1.Pod)

	vk   *nodeutil.Node
	bg   sync.WaitGroup
	stop sync.Once
}

// PodsDir is where pod directories (and their process records) live.
func PodsDir(stateDir string) string { return filepath.Join(stateDir, "pods") }

// VolumesDir is where claim volumes live.
func VolumesDir(stateDir string) string { return filepath.Join(stateDir, "volumes") }

// Start registers the node (or takes over its existing Node object, as a
// rebooted kubelet does: the pods bound to it start again) and starts
// serving its pods. Start StartServices first, which also sweeps what a
// crashed run left. It returns once the node is Ready.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Name == "" || cfg.StateDir == "" || cfg.Client == nil || cfg.Log == nil {
		return nil, errors.New("node: Name, StateDir, Client and Log are required")
	}
	for _, tool := range []string{"nsenter", "setpriv", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("node: %s (util-linux) is required: %w", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("node: must run as root (pods get their own mount namespaces and users)")
	}

	ctx, cancel := context.WithCancel(ctx)
	n := &Node{
		ctx: ctx, cancel: cancel, client: cfg.Client, log: cfg.Log, stateDir: cfg.StateDir, binDir: cfg.BinDir,
		name: cfg.Name, hostIP: "127.0.0.1", network: cfg.Network,
		pods: map[string]*podRuntime{}, dying: map[types.UID]*podRuntime{},
	}
	n.events = record.NewBroadcaster()
	n.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cfg.Client.CoreV1().Events("")})
	n.recorder = n.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: cfg.Name})
	vklog.L = vkslog.FromSlog(cfg.Log.With("component", "virtual-kubelet"))

	apiHost := cfg.APIHost
	if n.network != nil {
		apiHost = n.network.Gateway
	}
	tlsConfig, err := kubeletTLS(cfg.PKI)
	if err != nil {
		cancel()
		return nil, err
	}
	mux := http.NewServeMux()
	vk, err := nodeutil.NewNode(cfg.Name,
		func(pc nodeutil.ProviderConfig) (nodeutil.Provider, vknode.NodeProvider, error) {
			n.configMaps, n.secrets, n.podLister = pc.ConfigMaps, pc.Secrets, pc.Pods
			n.env = &envResolver{configMaps: pc.ConfigMaps, secrets: pc.Secrets,
				apiHost: apiHost, apiPort: cfg.APIPort, nodeName: cfg.Name, hostIP: n.hostIP}
			describeNode(pc.Node, cfg.Name, cfg.Zone, n.hostIP, cfg.KubeletPort)
			return n, nil, nil
		},
		nodeutil.WithClient(cfg.Client),
		nodeutil.AttachProviderRoutes(mux),
		func(c *nodeutil.NodeConfig) error {
			c.HTTPListenAddr = "127.0.0.1:" + strconv.Itoa(cfg.KubeletPort)
			c.TLSConfig = tlsConfig
			c.Handler = mux
			c.SkipDownwardAPIResolution = true // done here, with the pod IP known
			c.NumWorkers = 4
			c.EventRecorder = n.recorder
			return nil
		},
	)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("node: %w", err)
	}
	n.vk = vk
	n.bg.Go(func() {
		if err := vk.Run(ctx); err != nil && ctx.Err() == nil {
			n.log.Error("Node controller stopped", "err", err)
		}
	})
	if err := vk.WaitReady(ctx, time.Minute); err != nil {
		n.Stop(0)
		return nil, fmt.Errorf("node: not ready: %w", err)
	}
	return n, nil
}

// Stop stops every pod's processes (SIGTERM, then SIGKILL after grace; no
// preStop hooks, and pod objects are left in the API, as when a node goes
// down) and the node's controllers. It is idempotent.
func (n *Node) Stop(grace time.Duration) { n.halt(grace, false) }

// Crash stops the node as a machine that lost power would: the lease and
// status updates stop at once (kube-controller-manager's node lifecycle
// controller then marks the Node NotReady and taints it), every pod's
// processes get SIGKILL with no hook and no SIGTERM, the pods' directories
// and addresses are freed, and the pod objects stay as they were. Start a
// Node of the same name to bring it back. Crash after Stop, or twice, does
// nothing.
func (n *Node) Crash() { n.halt(0, true) }

func (n *Node) halt(grace time.Duration, crash bool) {
	n.stop.Do(func() {
		n.cancel()
		n.mu.Lock()
		var all []*podRuntime
		for _, pr := range n.pods {
			all = append(all, pr)
		}
		for _, pr := range n.dying {
			all = append(all, pr)
		}
		n.mu.Unlock()
		if crash {
			for _, pr := range all {
				pr.killNow()
			}
		}
		var wg sync.WaitGroup
		for _, pr := range all {
			wg.Go(func() { pr.terminate(grace, false) })
		}
		hurry := time.AfterFunc(grace+minGrace, func() {
			for _, pr := range all {
				pr.killNow()
			}
		})
		wg.Wait()
		hurry.Stop()
		for _, pr := range all {
			if pr.netns != nil || crash {
				n.releaseAddress(pr)
			}
			if crash {
				_ = os.RemoveAll(pr.dir)
			}
		}
		n.bg.Wait()
		n.events.Shutdown()
	})
}

func (n *Node) event(pod *corev1.Pod, kind, reason, msg string) {
	n.recorder.Event(pod, kind, reason, msg)
}

// describeNode fills in the Node object: addresses, the kubelet endpoint,
// capacity from this machine, and the usual well-known labels (with the
// zone, when given, as topology.kubernetes.io/zone).
func describeNode(node *corev1.Node, name, zone, hostIP string, kubeletPort int) {
	node.Labels["kubernetes.io/hostname"] = name
	if zone != "" {
		node.Labels[corev1.LabelTopologyZone] = zone
	}
	node.Labels["kubernetes.io/os"] = "linux"
	node.Labels["kubernetes.io/arch"] = runtime.GOARCH
	node.Labels["node.kubernetes.io/local-plane"] = "true"
	node.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: hostIP},
		{Type: corev1.NodeHostName, Address: name},
	}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(kubeletPort)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(int64(totalMemory()), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(250, resource.DecimalSI),
	}
	node.Status.Capacity = capacity
	node.Status.Allocatable = capacity.DeepCopy()
	node.Status.NodeInfo = corev1.NodeSystemInfo{
		OperatingSystem:         "linux",
		Architecture:            runtime.GOARCH,
		KubeletVersion:          "v1.34.2",
		ContainerRuntimeVersion: "localplane://1",
	}
}

// kubeletTLS serves with the API server's certificate (valid for
// 127.0.0.1) and accepts only clients with certificates from the plane's CA.
func kubeletTLS(files pki.Files) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(files.ServingCert(), files.ServingKey())
	if err != nil {
		return nil, fmt.Errorf("node: serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(files.CACert())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("node: no CA certificate in " + files.CACert())
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}, nil
}

// totalMemory is MemTotal from /proc/meminfo, in bytes.
func totalMemory() uint64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
