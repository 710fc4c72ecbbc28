// Package podnet is the host side of the local plane's pod network, with
// iproute2 (`ip`) and iptables. Each real node (package realnode) gets a
// bridge of its own, named BridgePrefix<k>, holding 10.244.<192+k>.1/24
// (the node's IP and its pods' gateway) inside NodeCIDRs; the CNI bridge
// plugin attaches the node's pods to it (see AddBridge). The host routes
// between the bridges, so pods of different nodes reach each other by
// their own addresses (no NAT), and one iptables rule on a pod IP (in
// FORWARD for other pods, OUTPUT/INPUT for host processes) cuts both
// directions.
//
// Addresses live in ranges that exist only on this machine's plane
// interfaces: pods' in PodCIDR, Services' ClusterIPs in ServiceCIDR. The
// host holds an interface, HostLink (a bridge without ports: this kernel
// has no dummy driver), that owns the plane's gateway address (one in
// 10.244.0.0/24 per plane, for the services the host offers pods: cluster
// DNS, the relay to the API server) and catches ServiceCIDR (a ClusterIP
// needs a route for kube-proxy's DNAT to see the packet); PodCIDR outside
// the bridges' subnets is unreachable, so a connection to the pod of a
// node that is gone fails at once instead of hanging. Neither range ever
// follows the machine's default route.
//
// The FORWARD chain jumps first to GuardChain, which lets through what is
// forwarded between node bridges and drops anything else they send or
// receive, so no pod packet leaves the machine.
//
// Every node bridge is recorded in <stateDir>/netns/, as is the gateway;
// Open removes the bridges recorded by an earlier run that was killed,
// with whatever is still attached to them.
package podnet

import (
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	// PodCIDR is the cluster's pod range: its first /24 holds the planes'
	// gateways, NodeCIDRs the node bridges and their pods.
	PodCIDR = "10.244.0.0/16"
	// NodeCIDRs is the part of PodCIDR kept for real nodes: bridge k (1 to
	// 63) has the /24 10.244.<192+k>.0/24.
	NodeCIDRs = "10.244.192.0/18"
	// BridgePrefix starts the name of every real node's bridge.
	BridgePrefix = "lpc"
	// GuardChain is the filter-table chain that FORWARD jumps to first: it
	// drops whatever a node bridge (BridgePrefix...) exchanges with any
	// interface but another node bridge.
	GuardChain = "LOCALPLANE-GUARD"
	// ServiceCIDR is the Services' ClusterIP range.
	ServiceCIDR = "10.96.0.0/16"
	// HostLink is the host interface (a bridge without ports) that owns the
	// gateways and catches unassigned ClusterIPs.
	HostLink = "lp0"
)

// Network is the plane's pod network.
type Network struct {
	// Gateway is the host's address for pods (on HostLink), where the host
	// offers them its services; pods reach it through their node bridge.
	Gateway string
	dir     string
}

// Open sets up the host side (HostLink with a gateway, the catch-all
// routes, IPv4 forwarding and the FORWARD guard rules) and removes the
// node bridges an earlier run with the same state directory left behind.
// The gateway recorded by an earlier run is kept, so addresses in its
// certificates stay valid. Needs root; errors name the command that
// failed.
func Open(stateDir string) (*Network, error) {
	dir := filepath.Join(stateDir, "netns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n := &Network{dir: dir}
	if err := n.sweep(); err != nil {
		return nil, fmt.Errorf("podnet: removing the node bridges of an earlier run: %w", err)
	}
	if err := hostSetup(); err != nil {
		return nil, fmt.Errorf("podnet: %w", err)
	}
	gw, err := n.gateway()
	if err != nil {
		return nil, fmt.Errorf("podnet: %w", err)
	}
	n.Gateway = gw
	return n, nil
}

// hostSetup makes HostLink, its catch-all routes and the guard rules; each
// step is skipped when already done (by this or another plane).
func hostSetup() error {
	if err := exec.Command("ip", "link", "show", HostLink).Run(); err != nil {
		if err := run("ip", "link", "add", HostLink, "type", "bridge"); err != nil {
			return err
		}
	}
	steps := [][]string{
		{"ip", "link", "set", HostLink, "up"},
		{"ip", "route", "replace", "unreachable", PodCIDR},
		{"ip", "route", "replace", ServiceCIDR, "dev", HostLink},
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return err
		}
	}
	return guardSetup()
}

// guardSetup fills GuardChain (replacing its rules at once, so another
// plane doing the same never opens a gap) and makes FORWARD jump to it
// first.
func guardSetup() error {
	var rules strings.Builder
	fmt.Fprintf(&rules, "*filter\n:%[1]s - [0:0]\n-A %[1]s -i %[2]s+ -o %[2]s+ -j RETURN\n", GuardChain, BridgePrefix)
	fmt.Fprintf(&rules, "-A %[1]s -i %[2]s+ -j DROP\n-A %[1]s -o %[2]s+ -j DROP\nCOMMIT\n", GuardChain, BridgePrefix)
	restore := exec.Command("iptables-restore", "-w", "--noflush")
	restore.Stdin = strings.NewReader(rules.String())
	if out, err := restore.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore %s: %v: %s", GuardChain, err, strings.TrimSpace(string(out)))
	}
	if exec.Command("iptables", "-w", "-C", "FORWARD", "-j", GuardChain).Run() != nil {
		if err := run("iptables", "-w", "-I", "FORWARD", "-j", GuardChain); err != nil {
			return err
		}
	}
	return nil
}

// gateway returns the recorded gateway, or picks a free address in
// 10.244.0.0/24, adds it to HostLink and records it.
func (n *Network) gateway() (string, error) {
	file := filepath.Join(n.dir, "gateway")
	if b, err := os.ReadFile(file); err == nil {
		gw := strings.TrimSpace(string(b))
		if err := addAddr(gw); err != nil {
			return "", err
		}
		return gw, nil
	}
	taken, err := hostAddrs()
	if err != nil {
		return "", err
	}
	for range 100 {
		k, err := rand.Int(rand.Reader, big.NewInt(254))
		if err != nil {
			return "", err
		}
		gw := fmt.Sprintf("10.244.0.%d", k.Int64()+1)
		if taken[gw] {
			continue
		}
		if err := addAddr(gw); err != nil {
			return "", err
		}
		return gw, os.WriteFile(file, []byte(gw+"\n"), 0o644)
	}
	return "", errors.New("no free gateway address in 10.244.0.0/24")
}

func addAddr(gw string) error {
	out, err := exec.Command("ip", "addr", "add", gw+"/32", "dev", HostLink).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "File exists") && !strings.Contains(string(out), "already assigned") {
		return fmt.Errorf("ip addr add %s: %v: %s", gw, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Close removes the gateway address from HostLink; its record stays, so a
// plane started again in the same state directory takes the same one
// (HostLink, the routes and the guard rules stay for other planes). The
// nodes' bridges must be removed first.
func (n *Network) Close() error {
	return run("ip", "addr", "del", n.Gateway+"/32", "dev", HostLink)
}

// Sweep removes the node bridges recorded in stateDir, what a plane that
// was killed left of its pod network; Open does the same. A state
// directory without a pod network is no error. Needs root.
func Sweep(stateDir string) error {
	n := &Network{dir: filepath.Join(stateDir, "netns")}
	if err := n.sweep(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("podnet: %w", err)
	}
	return nil
}

// sweep deletes every recorded node bridge (the records stay, so a node
// keeps its address).
func (n *Network) sweep() error {
	entries, err := os.ReadDir(n.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if node, ok := strings.CutPrefix(e.Name(), bridgeRecordPrefix); ok {
			errs = append(errs, n.RemoveBridge(node))
		}
	}
	return errors.Join(errs...)
}

// hostRoutes lists the destinations of the routes in PodCIDR (the node
// bridges' subnets among them).
func hostRoutes() (map[string]bool, error) {
	out, err := exec.Command("ip", "-4", "-o", "route", "show", "root", PodCIDR).Output()
	if err != nil {
		return nil, fmt.Errorf("ip route: %w", err)
	}
	return firstFields(string(out)), nil
}

// hostAddrs lists the addresses on HostLink.
func hostAddrs() (map[string]bool, error) {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show", "dev", HostLink).Output()
	if err != nil {
		return nil, fmt.Errorf("ip addr: %w", err)
	}
	m := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i := range f {
			if f[i] == "inet" && i+1 < len(f) {
				m[strings.TrimSuffix(f[i+1], "/32")] = true
			}
		}
	}
	return m, nil
}

func firstFields(out string) map[string]bool {
	m := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			m[f[0]] = true
		}
	}
	return m
}

func run(argv ...string) error {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
