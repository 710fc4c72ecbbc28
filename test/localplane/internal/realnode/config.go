package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
)

// configFiles are what writeConfig made, for starting the node.
type configFiles struct {
	containerdConfig string
	containerdSocket string
	kubeletArgs      []string
}

func podLogsDir(nodeDir string) string { return filepath.Join(nodeDir, "pod-logs") }

// networkName is the CNI network of node name (in its conflist, its IPAM
// data and libcni's cache).
func networkName(name string) string { return "localplane-" + name }

// writeConfig writes node cfg.Name's containerd, CNI and kubelet
// configuration for this boot, with a fresh run/ directory.
func writeConfig(cfg Config, br podnet.Bridge, p ports) (configFiles, error) {
	dir := NodeDir(cfg.StateDir, cfg.Name)
	run := runDir(dir)
	f := configFiles{
		containerdConfig: filepath.Join(dir, "containerd.toml"),
		containerdSocket: filepath.Join(run, "containerd.sock"),
	}
	if err := os.RemoveAll(run); err != nil {
		return f, err
	}
	for _, d := range []string{run, filepath.Join(dir, "cni", "net.d"), filepath.Join(dir, "kubelet"), podLogsDir(dir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return f, err
		}
	}
	if err := writeRegistryHosts(filepath.Join(dir, "certs.d"), cfg.Registry); err != nil {
		return f, err
	}
	if err := os.WriteFile(f.containerdConfig, []byte(containerdConfig(dir, f.containerdSocket)), 0o644); err != nil {
		return f, err
	}
	conflist, err := cniConfig(cfg.Name, br, filepath.Join(run, "ipam"))
	if err != nil {
		return f, err
	}
	if err := os.WriteFile(filepath.Join(dir, "cni", "net.d", "10-localplane.conflist"), conflist, 0o644); err != nil {
		return f, err
	}
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver "+cfg.Network.Gateway+"\n"), 0o644); err != nil {
		return f, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, cfg); err != nil {
		return f, err
	}
	kubeletConfig := filepath.Join(dir, "kubelet.yaml")
	b, err := kubeletConfiguration(cfg, dir, br, p, resolv, f.containerdSocket)
	if err != nil {
		return f, err
	}
	if err := os.WriteFile(kubeletConfig, b, 0o644); err != nil {
		return f, err
	}
	labels := []string{"node.kubernetes.io/local-plane=true"}
	if cfg.Zone != "" {
		labels = append(labels, corev1.LabelTopologyZone+"="+cfg.Zone)
	}
	f.kubeletArgs = []string{
		"--config=" + kubeletConfig,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(dir, "kubelet"),
		"--cert-dir=" + filepath.Join(dir, "kubelet", "pki"),
		"--hostname-override=" + cfg.Name,
		"--node-ip=" + br.Gateway,
		"--node-labels=" + strings.Join(labels, ","),
		"--v=2",
	}
	return f, nil
}

// containerdConfig is the node's containerd configuration (version 2): its
// own root, state and sockets under dir, no debug or metrics listener, the
// snapshotters this machine cannot use disabled, and the CRI plugin with
// the sandbox image, runc with cgroupfs (state under run/), the node's CNI
// configuration, the network namespaces under its state directory (so the
// node's sweep finds them) and registry hosts from certs.d. OOM score
// adjustments are kept at containerd's own or above (the kubelet asks for
// negative ones), since this machine withholds CAP_SYS_RESOURCE even from
// root.
func containerdConfig(dir, socket string) string {
	run := runDir(dir)
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = %q
  max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = %q

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = %q
`,
		filepath.Join(dir, "containerd"), filepath.Join(run, "containerd"),
		socket, socket+".ttrpc",
		filepath.Join(dir, "containerd", "opt"),
		SandboxImage,
		filepath.Join(dir, "cni", "net.d"),
		filepath.Join(run, "runc"),
		filepath.Join(dir, "certs.d"))
}

// writeRegistryHosts writes, under certsDir, a hosts.toml for each of
// MirroredRegistries, and one for any other registry (_default), whose
// server, and only host, is http://<registry>: every pull goes there, and
// nowhere else (no fall-back to the registry itself). containerd 1.6
// rejects a hosts.toml without a host table, and then falls back to the
// registry on the Internet.
func writeRegistryHosts(certsDir, registry string) error {
	if err := os.RemoveAll(certsDir); err != nil {
		return err
	}
	for _, r := range append(slices.Clone(MirroredRegistries), "_default") {
		d := filepath.Join(certsDir, r)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		url := "http://" + registry
		hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", url, url)
		if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cniConfig is the node's CNI network: the bridge plugin on the node's
// bridge (its address is the pods' gateway; hairpin on, so a pod reaches
// itself through a Service), host-local IPAM over the bridge's /24 with
// its data in ipamDir and routes to the pod and Service ranges only (no
// default route: a pod reaches nothing else), and portmap for hostPorts.
// containerd adds the loopback interface itself (with the loopback plugin).
func cniConfig(name string, br podnet.Bridge, ipamDir string) ([]byte, error) {
	prefix := strings.TrimSuffix(br.Gateway, ".1")
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       networkName(name),
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": br.Name, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"dataDir": ipamDir,
					"ranges": [][]map[string]string{{{
						"subnet": br.Subnet, "rangeStart": prefix + ".2", "rangeEnd": prefix + ".254", "gateway": br.Gateway,
					}}},
					"routes": []map[string]string{{"dst": podnet.PodCIDR}, {"dst": podnet.ServiceCIDR}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}, "", "  ")
}

// kubeletConfiguration is the node's KubeletConfiguration (written as
// YAML; only fields the kubelet v1.34 knows).
func kubeletConfiguration(cfg Config, dir string, br podnet.Bridge, p ports, resolv, socket string) ([]byte, error) {
	return yaml.Marshal(map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		// Serving: on the node IP, with a certificate from the plane's CA
		// (the API server verifies kubelets against it); clients are the
		// API server's kubelet-client certificate or bearer tokens, checked
		// by the API server (webhook).
		"address":            br.Gateway,
		"port":               p.kubelet,
		"readOnlyPort":       0,
		"healthzBindAddress": "127.0.0.1",
		"healthzPort":        p.healthz,
		"tlsCertFile":        cfg.PKI.KubeletServingCert(cfg.Name),
		"tlsPrivateKeyFile":  cfg.PKI.KubeletServingKey(cfg.Name),
		"rotateCertificates": false,
		"serverTLSBootstrap": false,
		"authentication": map[string]any{
			"x509":      map[string]any{"clientCAFile": cfg.PKI.CACert()},
			"webhook":   map[string]any{"enabled": true},
			"anonymous": map[string]any{"enabled": false},
		},
		"authorization": map[string]any{"mode": "Webhook"},
		// Several kubelets on one machine: each its own cgroup root, runtime,
		// log and plugin directories.
		"cgroupDriver":             "cgroupfs",
		"cgroupRoot":               cgroupRoot(cfg.StateDir, cfg.Name),
		"cgroupsPerQOS":            true,
		"failCgroupV1":             false,
		"containerRuntimeEndpoint": "unix://" + socket,
		"podLogsDir":               podLogsDir(dir),
		"volumePluginDir":          filepath.Join(dir, "kubelet", "volume-plugins"),
		"failSwapOn":               false,
		// Pods' DNS: the plane's cluster DNS on the pod network's gateway.
		"clusterDNS":    []string{cfg.Network.Gateway},
		"clusterDomain": ClusterDomain,
		"resolvConf":    resolv,
		"podCIDR":       br.Subnet,
		// The machine's disk and images are shared with everything else:
		// no image garbage collection, and evictions only when nearly full.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{
			"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%",
		},
		"serializeImagePulls":       false,
		"nodeStatusUpdateFrequency": "10s",
	})
}

// writeKubeconfig writes the kubelet's kubeconfig: the API server, the
// plane's CA and the node's client certificate.
func writeKubeconfig(path string, cfg Config) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["localplane"] = &clientcmdapi.Cluster{Server: cfg.APIServer, CertificateAuthority: cfg.PKI.CACert()}
	c.AuthInfos[cfg.Name] = &clientcmdapi.AuthInfo{
		ClientCertificate: cfg.PKI.NodeCert(cfg.Name), ClientKey: cfg.PKI.NodeKey(cfg.Name),
	}
	c.Contexts["localplane"] = &clientcmdapi.Context{Cluster: "localplane", AuthInfo: cfg.Name}
	c.CurrentContext = "localplane"
	return clientcmd.WriteToFile(*c, path)
}
