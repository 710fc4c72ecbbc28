// Package controlplane runs etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kube-proxy as local processes (all but kube-proxy
// listening on 127.0.0.1 only) with generated certificates, and writes an
// admin kubeconfig.
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
// The kubelets renew their leases every 10 s (a quarter of the 40 s
// lease) and post their status as often, so three renewals may be missed
// on a busy machine; the controller manager's default is 40 s.
const NodeMonitorGracePeriod = 30 * time.Second

// Options configure Start.
type Options struct {
	// StateDir holds everything the plane writes; created if missing.
	StateDir string
	// BinDir holds the etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and kube-proxy binaries.
	BinDir string
	// StartTimeout bounds the wait for each component to become ready.
	StartTimeout time.Duration
	// ServiceCIDR is the Services' ClusterIP range (an IPv4 CIDR); its
	// first address is in the API server's certificate. Required.
	ServiceCIDR string
	// ClusterCIDR is the pods' range, for kube-proxy (iptables mode), which
	// routes ClusterIPs to ready endpoints. Required.
	ClusterCIDR string
	// ProxyNode is the node kube-proxy serves. Required.
	ProxyNode string
	// AdvertiseAddress is the IP the API server publishes as the endpoint
	// of the default/kubernetes Service (with its secure port; the lease
	// endpoint reconciler keeps it), so that the Service's ClusterIP
	// routes through kube-proxy. The API server still listens on
	// 127.0.0.1 only: something must relay that address to it (the
	// plane's services do, on the pod network's gateway). It is in the API
	// server's certificate (made once per state directory). Required.
	AdvertiseAddress string
}

// Ports are the loopback ports the control plane listens on.
type Ports struct {
	EtcdClient int `json:"etcdClient"`
	EtcdPeer   int `json:"etcdPeer"`
	APIServer  int `json:"apiServer"`
}

// ControlPlane is a running control plane.
type ControlPlane struct {
	Ports Ports
	// PKI holds the plane's CA, which the nodes' certificates are made
	// from.
	PKI pki.Files
	// Kubeconfig is the admin (system:masters) kubeconfig's path, and
	// RESTConfig its client configuration.
	Kubeconfig string
	RESTConfig *rest.Config

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

// Start brings up etcd and kube-apiserver, waits until the API server is
// ready, then starts kube-controller-manager, kube-scheduler and
// kube-proxy. Leftover processes of an earlier run that crashed are killed
// first. Errors name a missing option or binary, or the component that
// failed to start (its log is logs/<component>.log); on error everything
// started is stopped again.
func Start(ctx context.Context, o Options) (*ControlPlane, error) {
	if o.StateDir == "" || o.BinDir == "" || o.ServiceCIDR == "" || o.ClusterCIDR == "" || o.ProxyNode == "" || o.AdvertiseAddress == "" {
		return nil, errors.New("controlplane: StateDir, BinDir, ServiceCIDR, ClusterCIDR, ProxyNode and AdvertiseAddress are required")
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 2 * time.Minute
	}
	for _, bin := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"} {
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
	ports, err := ensurePorts(filepath.Join(o.StateDir, "ports.json"))
	if err != nil {
		return nil, err
	}
	_, svcNet, err := net.ParseCIDR(o.ServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("controlplane: service CIDR: %w", err)
	}
	firstSvc := append(net.IP(nil), svcNet.IP.To4()...)
	firstSvc[3]++
	files, err := pki.Ensure(filepath.Join(o.StateDir, "pki"),
		[]net.IP{net.ParseIP("127.0.0.1"), firstSvc, net.ParseIP(o.AdvertiseAddress)},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"})
	if err != nil {
		return nil, fmt.Errorf("controlplane: %w", err)
	}
	cp := &ControlPlane{Ports: ports, PKI: files, stateDir: o.StateDir, Kubeconfig: filepath.Join(o.StateDir, "kubeconfig")}
	server := fmt.Sprintf("https://127.0.0.1:%d", ports.APIServer)
	cmKubeconfig := filepath.Join(o.StateDir, "pki", "controller-manager.kubeconfig")
	for path, id := range map[string]string{cp.Kubeconfig: pki.Admin, cmKubeconfig: pki.ControllerManager} {
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
	// The Node authorizer (before RBAC) and the NodeRestriction admission
	// plugin limit what a kubelet (user system:node:<name>, group
	// system:nodes) may read and write to its own Node and pods.
	api, err := cp.start("kube-apiserver", filepath.Join(o.BinDir, "kube-apiserver"),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address="+o.AdvertiseAddress,
		"--secure-port="+strconv.Itoa(ports.APIServer),
		"--tls-cert-file="+files.ServingCert(),
		"--tls-private-key-file="+files.ServingKey(),
		"--client-ca-file="+files.CACert(),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+files.ServiceAccountPub(),
		"--service-account-signing-key-file="+files.ServiceAccountKey(),
		"--service-cluster-ip-range="+o.ServiceCIDR,
		"--endpoint-reconciler-type=lease",
		"--allow-privileged=true",
		"--kubelet-client-certificate="+files.ClientCert(pki.KubeletClient),
		"--kubelet-client-key="+files.ClientKey(pki.KubeletClient),
		"--kubelet-certificate-authority="+files.CACert(),
		"--kubelet-preferred-address-types=InternalIP",
		"--cert-dir="+filepath.Join(o.StateDir, "pki"),
		"--profiling=false",
		// Webhooks and aggregated APIs are called on their Service's
		// endpoints (pod IP and port) rather than its ClusterIP, so a call
		// does not wait for kube-proxy to have synced the Service.
		"--enable-aggregator-routing=true",
		"--audit-policy-file="+auditPolicy,
		"--audit-log-path="+filepath.Join(LogDir(o.StateDir), AuditLog),
		"--audit-log-format=json",
		"--audit-log-maxsize=100",
	)
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
	// profile. Its client is the controller manager's, in system:masters.
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
	if err := cp.startKubeProxy(o.BinDir, cmKubeconfig, o.ClusterCIDR, o.ProxyNode); err != nil {
		return nil, err
	}
	ok = true
	return cp, nil
}

// Stop stops kube-proxy, the scheduler, the controller manager, the API
// server and etcd, in that order, then removes kube-proxy's rules. It is
// idempotent.
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

// ensurePorts reads the ports of an earlier run from path (JSON, Ports)
// and keeps those still free on 127.0.0.1; the rest are picked anew. The
// result is written back.
func ensurePorts(path string) (Ports, error) {
	var p Ports
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &p); err != nil {
			return p, fmt.Errorf("controlplane: reading %s: %w", path, err)
		}
	}
	taken := map[int]bool{}
	for _, port := range []*int{&p.EtcdClient, &p.EtcdPeer, &p.APIServer} {
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
