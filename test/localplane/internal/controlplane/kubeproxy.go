package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// startKubeProxy runs kube-proxy (Kubernetes 1.34, built from the same
// module as the API server) in iptables mode on the machine's network
// stack: it writes the KUBE-* chains of the nat and filter tables that
// DNAT a ClusterIP to a ready endpoint, for connections from pods
// (PREROUTING) and from host processes (OUTPUT). Node ports are left to
// the pod addresses only (127.0.0.1 is not a node-port address, so
// kube-proxy leaves route_localnet alone), conntrack limits are not
// touched, and its health and metrics servers listen on free loopback
// ports. Stop removes its chains (kube-proxy --cleanup); after a crash the
// next kube-proxy's first sync replaces them all.
func (cp *ControlPlane) startKubeProxy(binDir, kubeconfig, clusterCIDR, nodeName string) error {
	taken := map[int]bool{cp.Ports.EtcdClient: true, cp.Ports.EtcdPeer: true, cp.Ports.APIServer: true}
	healthz, err := freePort(taken)
	if err != nil {
		return err
	}
	taken[healthz] = true
	metrics, err := freePort(taken)
	if err != nil {
		return err
	}
	_, err = cp.start("kube-proxy", filepath.Join(binDir, "kube-proxy"),
		"--kubeconfig="+kubeconfig,
		"--proxy-mode=iptables",
		"--hostname-override="+nodeName,
		"--cluster-cidr="+clusterCIDR,
		"--nodeport-addresses="+clusterCIDR,
		"--iptables-localhost-nodeports=false",
		"--conntrack-max-per-core=0",
		"--conntrack-tcp-timeout-established=0",
		"--conntrack-tcp-timeout-close-wait=0",
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(healthz),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metrics),
		"--profiling=false",
	)
	if err != nil {
		return fmt.Errorf("controlplane: kube-proxy: %w", err)
	}
	cp.kubeProxy = filepath.Join(binDir, "kube-proxy")
	return nil
}

// cleanupKubeProxy removes the rules kube-proxy wrote, logging failures to
// kube-proxy's log.
func (cp *ControlPlane) cleanupKubeProxy() {
	log, err := os.OpenFile(filepath.Join(LogDir(cp.stateDir), "kube-proxy.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer log.Close()
	cmd := exec.Command(cp.kubeProxy, "--cleanup", "--proxy-mode=iptables")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(log, "localplane: kube-proxy --cleanup:", err)
	}
}
