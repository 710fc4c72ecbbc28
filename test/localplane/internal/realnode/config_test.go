package realnode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/redis-operator/redis-operator/test/localplane/internal/pki"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
)

// TestWriteConfig writes a node's configuration and checks what the
// kubelet and containerd rely on: the KubeletConfiguration decodes strictly
// (every field name known) with the node's own cgroup root, runtime socket,
// ports and DNS, and no taint; the kubelet's flags; containerd's own sockets,
// state and CNI directory; the CNI network on the node's bridge; and every
// registry sent to the plane's.
func TestWriteConfig(t *testing.T) {
	state := t.TempDir()
	cfg := Config{
		Name: "localplane-1", Zone: "zone-a", StateDir: state, BinDir: "/bin", APIServer: "https://127.0.0.1:6443",
		PKI: pki.Files{Dir: filepath.Join(state, "pki")}, Network: &podnet.Network{Gateway: "10.244.0.9"}, Registry: "127.0.0.1:5000",
	}
	br := podnet.Bridge{Name: "lpc3", Subnet: "10.244.195.0/24", Gateway: "10.244.195.1"}
	f, err := writeConfig(cfg, br, ports{kubelet: 10250, healthz: 10248})
	if err != nil {
		t.Fatal(err)
	}
	dir := NodeDir(state, cfg.Name)

	b, err := os.ReadFile(filepath.Join(dir, "kubelet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(b, &kc); err != nil {
		t.Fatalf("kubelet.yaml does not decode strictly: %v\n%s", err, b)
	}
	if kc.CgroupRoot != cgroupRoot(state, cfg.Name) || kc.CgroupDriver != "cgroupfs" ||
		kc.ContainerRuntimeEndpoint != "unix://"+f.containerdSocket || kc.Address != br.Gateway || kc.Port != 10250 ||
		kc.ReadOnlyPort != 0 || *kc.HealthzPort != 10248 || !slices.Equal(kc.ClusterDNS, []string{"10.244.0.9"}) ||
		kc.ClusterDomain != ClusterDomain || *kc.FailSwapOn || *kc.ImageGCHighThresholdPercent != 100 || *kc.SerializeImagePulls ||
		kc.PodCIDR != br.Subnet || kc.Authorization.Mode != "Webhook" || !*kc.Authentication.Webhook.Enabled ||
		kc.Authentication.X509.ClientCAFile != cfg.PKI.CACert() {
		t.Errorf("kubelet configuration: %s", b)
	}
	if len(kc.RegisterWithTaints) != 0 {
		t.Errorf("taints %v, want none: every pod may run on every node", kc.RegisterWithTaints)
	}
	for _, want := range []string{"--hostname-override=localplane-1", "--node-ip=10.244.195.1", "--root-dir=" + filepath.Join(dir, "kubelet"),
		"--node-labels=node.kubernetes.io/local-plane=true,topology.kubernetes.io/zone=zone-a"} {
		if !slices.Contains(f.kubeletArgs, want) {
			t.Errorf("kubelet flags %v lack %s", f.kubeletArgs, want)
		}
	}

	b, err = os.ReadFile(f.containerdConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`address = "` + f.containerdSocket + `"`, `address = "` + f.containerdSocket + `.ttrpc"`,
		`state = "` + filepath.Join(dir, "run", "containerd") + `"`, `sandbox_image = "registry.k8s.io/pause:3.10"`,
		`conf_dir = "` + filepath.Join(dir, "cni", "net.d") + `"`, "SystemdCgroup = false", "netns_mounts_under_state_dir = true",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("containerd.toml lacks %s:\n%s", want, b)
		}
	}

	b, err = os.ReadFile(filepath.Join(dir, "cni", "net.d", "10-localplane.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPAM   struct {
				DataDir string                `json:"dataDir"`
				Ranges  [][]map[string]string `json:"ranges"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil {
		t.Fatal(err)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[0].Bridge != br.Name ||
		conf.Plugins[0].IPAM.Ranges[0][0]["subnet"] != br.Subnet || !strings.HasPrefix(conf.Plugins[0].IPAM.DataDir, filepath.Join(dir, "run")+"/") ||
		conf.Plugins[1].Type != "portmap" {
		t.Errorf("CNI network: %s", b)
	}

	for _, r := range append(slices.Clone(MirroredRegistries), "_default") {
		b, err := os.ReadFile(filepath.Join(dir, "certs.d", r, "hosts.toml"))
		if err != nil || !strings.Contains(string(b), `server = "http://127.0.0.1:5000"`) || !strings.Contains(string(b), `[host."http://127.0.0.1:5000"]`) {
			t.Errorf("hosts.toml of %s: %q, %v", r, b, err)
		}
	}
}
