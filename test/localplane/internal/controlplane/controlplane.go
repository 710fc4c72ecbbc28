// Package controlplane runs etcd, kube-apiserver, kube-controller-manager
// and kube-scheduler as local processes on 127.0.0.1 with generated
// certificates, and writes an admin kubeconfig.
//
// Layout under the state directory:
//
//	pki/             CA, serving and client certificates, service-account keys
//	etcd/            etcd data (kept across restarts)
//	logs/<name>.log  each component's output
//	run/<name>.pid   live children, swept on the next start after a crash
//	ports.json       ports in use, reused on restart when still free
//	kubeconfig       admin kubeconfig (system:masters)
package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/redis-operator/redis-operator/test/localplane/internal/pki"
	"github.com/redis-operator/redis-operator/test/localplane/internal/proctree"
)

// ServiceCIDR is the Service cluster-IP range when Options.ServiceCIDR is
// empty (pods without network namespaces). It is on loopback so that a
// client that dials a ClusterIP by mistake never sends traffic off the
// machine; nothing routes these addresses (there is no kube-proxy).
const ServiceCIDR = "127.96.0.0/16"

// Controllers run by kube-controller-manager (names as in its --controllers
// flag, Kubernetes 1.34).
var Controllers = []string{
	"statefulset-controller",
	"garbage-collector-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
	"persistentvolume-binder-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-protection-controller",
	"serviceaccount-controller",
	"root-ca-certificate-publisher-controller",
	"namespace-controller",
	"replicaset-controller",
	"deployment-controller",
	"job-controller",
	"disruption-controller",
	"pod-garbage-collector-controller",
	"clusterrole-aggregation-controller",
	"ttl-after-finished-controller",
	"ephemeral-volume-controller",
	"node-lifecycle-controller",
	"taint-eviction-controller",
}

// NodeMonitorGracePeriod is how long a node's lease and status may go
// without renewal before the node lifecycle controller marks it NotReady
// (condition Ready=Unknown) and taints it node.kubernetes.io/unreachable.
// The process nodes renew their leases every 10 s (virtual-kubelet's
// 40 s lease, renewed at a quarter of it), so three renewals may be missed
// on a busy machine; the kubelet's default is 40 s.
const NodeMonitorGracePeriod = 30 * time.Second

// Options configure Start.
type Options struct {
	// StateDir holds everything the plane writes; created if missing.
	StateDir string
	// BinDir holds the etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler binaries.
	BinDir string
	// StartTimeout bounds the wait for each component to become ready.
	StartTimeout time.Duration
	// ServiceCIDR is the Services' ClusterIP range; the package's
	// ServiceCIDR when empty. Its first address is in the API server's
	// certificate.
	ServiceCIDR string
	// ServingIPs are more addresses for the API server's certificate (made
	// once per state directory), such as the gateway pods reach it through.
	ServingIPs []net.IP
	// KubeProxy, when set, runs bin/kube-proxy in iptables mode with this
	// cluster (pod) CIDR, so that ClusterIPs route to ready endpoints.
	KubeProxy string
	// NodeName is the node kube-proxy serves (with KubeProxy).
	NodeName string
	// Nodes is how many process nodes need a kubelet port (Ports.Kubelets);
	// at least 1.
	Nodes int
	// NodeAuthorization turns on the Node authorizer (before RBAC) and the
	// NodeRestriction admission plugin, which limit what a real kubelet
	// (user system:node:<name>, group system:nodes) may read and write to
	// its own Node and pods. The process nodes' identity is in
	// system:masters, which neither touches.
	NodeAuthorization bool
	// AdvertiseAddress, when set, is the IP the API server publishes as
	// the endpoint of the default/kubernetes Service (with its secure
	// port; the lease endpoint reconciler keeps it), so that the Service's
	// ClusterIP routes through kube-proxy. The API server still listens on
	// 127.0.0.1 only: something must relay that address to it (the
	// process nodes' Services do, on the pod network's gateway). Without
	// it the Service has no endpoints.
	AdvertiseAddress string
}

// Ports are the loopback ports the control plane listens on.
type Ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
	APIServer  int `json:"apiServer"`
	// Kubelet is the port of the first process node's kubelet API (logs,
	// exec).
	Kubelet int `json:"kubelet"`
	// Kubelets are the kubelet ports of the other nodes, in order.
	Kubelets []int `json:"kubelets,omitempty"`
}

// KubeletPort is the kubelet port of node i (0-based).
func (p Ports) KubeletPort(i int) int {
	if i == 0 {
		return p.Kubelet
	}
	return p.Kubelets[i-1]
}

// ControlPlane is a running etcd, API server and controller manager.
type ControlPlane struct {
	Ports      Ports
	PKI        pki.Files
	Kubeconfig string
	// NodeKubeconfig is the kubeconfig the process node uses.
	NodeKubeconfig string
	RESTConfig     *rest.Config

	stateDir string
	procs    []*proctree.Process
	// kubeProxy is the kube-proxy binary when one runs, for its cleanup.
	kubeProxy string
}

// RunDir is where pid records of the plane's children live.
func RunDir(stateDir string) string { return filepath.Join(stateDir, "run") }

// AuditLog is the API server's audit log in LogDir: one JSON event per
// line (audit.k8s.io/v1 Event, stage ResponseComplete, level Metadata) for
// every request made by a service account outside kube-system, so a test
// can tell what a pod's own identity was allowed and refused
// (responseStatus.code 403).
const AuditLog = "kube-apiserver-audit.log"

// auditPolicyYAML: the kube-system controllers' service accounts are
// not logged; every other service account is, at Metadata level.
const auditPolicyYAML = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  userGroups: ["system:serviceaccounts:kube-system"]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// LogDir is where the plane's components write their output.
func LogDir(stateDir string) string { return filepath.Join(stateDir, "logs") }

// Start brings up etcd, kube-apiserver and kube-controller-manager and waits
// until the API server is ready. Leftover processes of an earlier run that
// crashed are killed first. On error everything started is stopped again.
func Start(ctx context.Context, o Options) (*ControlPlane, error) {
	if o.StateDir == "" || o.BinDir == "" {
		return nil, errors.New("controlplane: StateDir and BinDir are required")
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	bins := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	if o.KubeProxy != "" {
		bins = append(bins, "kube-proxy")
	}
	for _, bin := range bins {
		if _, err := os.Stat(filepath.Join(o.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("controlplane: %s not found in %s (build it with `make tools`): %w", bin, o.BinDir, err)
		}
	}
	if _, err := proctree.Sweep(RunDir(o.StateDir)); err != nil {
		return nil, fmt.Errorf("controlplane: killing leftovers of an earlier run: %w", err)
	}
	for _, d := range []string{LogDir(o.StateDir), filepath.Join(o.StateDir, "etcd")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	ports, err := ensurePorts(filepath.Join(o.StateDir, "ports.json"), max(o.Nodes, 1))
	if err != nil {
		return nil, err
	}
	if o.ServiceCIDR == "" {
		o.ServiceCIDR = ServiceCIDR
	}
	_, svcNet, err := net.ParseCIDR(o.ServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("controlplane: service CIDR: %w", err)
	}
	firstSvc := append(net.IP(nil), svcNet.IP.To4()...)
	firstSvc[3]++
	files, err := pki.Ensure(filepath.Join(o.StateDir, "pki"),
		append([]net.IP{net.ParseIP("127.0.0.1"), firstSvc}, o.ServingIPs...),
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	cp := &ControlPlane{Ports: ports, PKI: files, stateDir: o.StateDir,
		Kubeconfig:     filepath.Join(o.StateDir, "kubeconfig"),
		NodeKubeconfig: filepath.Join(o.StateDir, "pki", "node.kubeconfig"),
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", ports.APIServer)
	cmKubeconfig := filepath.Join(o.StateDir, "pki", "controller-manager.kubeconfig")
	for path, id := range map[string]string{cp.Kubeconfig: pki.Admin, cmKubeconfig: pki.ControllerManager, cp.NodeKubeconfig: pki.Node} {
		if err := writeKubeconfig(path, server, files, id); err != nil {
			return nil, fmt.Errorf("controlplane: writing kubeconfig: %w", err)
		}
	}
	cp.RESTConfig, err = clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return nil, err
	}

	ok := false
	defer func() {
		if !ok {
			cp.Stop()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports.EtcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports.EtcdPeer)
	etcd, err := cp.start("etcd", filepath.Join(o.BinDir, "etcd"),
		"--name=localplane",
		"--data-dir="+filepath.Join(o.StateDir, "etcd"),
		"--listen-client-urls="+etcdURL,
		"--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=localplane="+peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, etcd, http.DefaultClient, etcdURL+"/health", "etcd"); err != nil {
		return nil, err
	}

	auditPolicy := filepath.Join(o.StateDir, "pki", "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte(auditPolicyYAML), 0o644); err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	advertise, reconciler := "127.0.0.1", "none"
	if o.AdvertiseAddress != "" {
		advertise, reconciler = o.AdvertiseAddress, "lease"
	}
	authorization := []string{"--authorization-mode=RBAC"}
	if o.NodeAuthorization {
		authorization = []string{"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction"}
	}
	api, err := cp.start("kube-apiserver", filepath.Join(o.BinDir, "kube-apiserver"), append(authorization,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address="+advertise,
		"--secure-port="+strconv.Itoa(ports.APIServer),
		"--tls-cert-file="+files.ServingCert(),
		"--tls-private-key-file="+files.ServingKey(),
		"--client-ca-file="+files.CACert(),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+files.ServiceAccountPub(),
		"--service-account-signing-key-file="+files.ServiceAccountKey(),
		"--service-cluster-ip-range="+o.ServiceCIDR,
		"--endpoint-reconciler-type="+reconciler,
		"--allow-privileged=true",
		"--kubelet-client-certificate="+files.ClientCert(pki.KubeletClient),
		"--kubelet-client-key="+files.ClientKey(pki.KubeletClient),
		"--kubelet-certificate-authority="+files.CACert(),
		"--kubelet-preferred-address-types=InternalIP",
		"--cert-dir="+filepath.Join(o.StateDir, "pki"),
		"--profiling=false",
		// Webhooks and aggregated APIs are called on their Service's
		// endpoints (pod IP and port), as no kube-proxy routes ClusterIPs
		// for the API server: a webhook's service clientConfig works as
		// shipped.
		"--enable-aggregator-routing=true",
		"--audit-policy-file="+auditPolicy,
		"--audit-log-path="+filepath.Join(LogDir(o.StateDir), AuditLog),
		"--audit-log-format=json",
		"--audit-log-maxsize=100",
	)...)
	if err != nil {
		return nil, err
	}
	tlsClient, err := rest.HTTPClientFor(cp.RESTConfig)
	if err != nil {
		return nil, err
	}
	if err := waitHTTP(ctx, api, tlsClient, server+"/readyz", "kube-apiserver"); err != nil {
		return nil, err
	}

	if _, err := cp.start("kube-controller-manager", filepath.Join(o.BinDir, "kube-controller-manager"),
		"--kubeconfig="+cmKubeconfig,
		"--controllers="+strings.Join(Controllers, ","),
		"--root-ca-file="+files.CACert(),
		"--service-account-private-key-file="+files.ServiceAccountKey(),
		"--secure-port=0",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--profiling=false",
		"--node-monitor-period=2s",
		"--node-monitor-grace-period="+NodeMonitorGracePeriod.String(),
	); err != nil {
		return nil, err
	}
	// The real scheduler: affinity, anti-affinity, topology spread, taints
	// and tolerations, volume binding, preemption, with its default
	// profile. Its client is in system:masters like every identity here.
	// A pod found unschedulable is tried again after 20 s at the latest
	// instead of 5 min: a pod scheduled just before the scheduler saw its
	// new claim ("pod has unbound immediate PersistentVolumeClaims. not
	// found") was seen to wait out the whole 5 min, with the claim bound.
	if _, err := cp.start("kube-scheduler", filepath.Join(o.BinDir, "kube-scheduler"),
		"--kubeconfig="+cmKubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--profiling=false",
		"--pod-max-in-unschedulable-pods-duration=20s",
	); err != nil {
		return nil, err
	}
	if o.KubeProxy != "" {
		if err := cp.startKubeProxy(o.BinDir, cmKubeconfig, o.KubeProxy, o.NodeName); err != nil {
			return nil, err
		}
	}
	ok = true
	return cp, nil
}

// Stop stops the controller manager, the API server and etcd, in that order.
// It is idempotent.
func (cp *ControlPlane) Stop() {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].Stop(10 * time.Second)
	}
	cp.procs = nil
	if cp.kubeProxy != "" {
		cp.cleanupKubeProxy()
		cp.kubeProxy = ""
	}
}

// Exited reports the first component that has exited on its own, or nil.
func (cp *ControlPlane) Exited() error {
	for _, p := range cp.procs {
		select {
		case <-p.Done():
			return fmt.Errorf("%s exited (%v); see %s", p.Cmd.Path, p.Err(), LogDir(cp.stateDir))
		default:
		}
	}
	return nil
}

func (cp *ControlPlane) start(name, bin string, args ...string) (*proctree.Process, error) {
	logFile, err := os.OpenFile(filepath.Join(LogDir(cp.stateDir), name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	p, err := proctree.Start(RunDir(cp.stateDir), name, cmd)
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	cp.procs = append(cp.procs, p)
	return p, nil
}

// waitHTTP polls url until it answers 200, the process exits, or ctx ends.
func waitHTTP(ctx context.Context, p *proctree.Process, client *http.Client, url, name string) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("status %d: %s", resp.StatusCode, strings.TrimSpace(body.String()))
		} else {
			last = err.Error()
		}
		select {
		case <-p.Done():
			return fmt.Errorf("controlplane: %s exited while starting (%v); see its log in logs/%s.log", name, p.Err(), name)
		case <-ctx.Done():
			return fmt.Errorf("controlplane: %s not ready (%s): %w", name, last, ctx.Err())
		case <-tick.C:
		}
	}
}

func writeKubeconfig(path, server string, files pki.Files, id string) error {
	ca, err := os.ReadFile(files.CACert())
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(files.ClientCert(id))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(files.ClientKey(id))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["localplane"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[id] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["localplane"] = &clientcmdapi.Context{Cluster: "localplane", AuthInfo: id, Namespace: "default"}
	cfg.CurrentContext = "localplane"
	return clientcmd.WriteToFile(*cfg, path)
}

// ensurePorts reads the ports of an earlier run from path and keeps those
// still free; the rest are picked anew, with kubelet ports for nodes
// nodes. The result is written back.
func ensurePorts(path string, nodes int) (Ports, error) {
	var p Ports
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &p); err != nil {
			return p, fmt.Errorf("controlplane: reading %s: %w", path, err)
		}
	}
	taken := map[int]bool{}
	for len(p.Kubelets) < nodes-1 {
		p.Kubelets = append(p.Kubelets, 0)
	}
	all := []*int{&p.EtcdClient, &p.EtcdPeer, &p.APIServer, &p.Kubelet}
	for i := range p.Kubelets {
		all = append(all, &p.Kubelets[i])
	}
	for _, port := range all {
		if *port == 0 || taken[*port] || !portFree(*port) {
			free, err := freePort(taken)
			if err != nil {
				return p, err
			}
			*port = free
		}
		taken[*port] = true
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return p, err
	}
	return p, os.WriteFile(path, b, 0o644)
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func freePort(taken map[int]bool) (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("controlplane: finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !taken[port] {
			return port, nil
		}
	}
	return 0, errors.New("controlplane: no free port found")
}
