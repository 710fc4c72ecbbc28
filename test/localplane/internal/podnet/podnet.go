// Package podnet gives each pod of the local plane a network namespace of
// its own, as a CNI plugin would on a real node, with iproute2 (`ip`) and
// iptables.
//
// Addresses live in ranges that exist only on this machine's plane
// interfaces: pods get a /32 in PodCIDR, Services' ClusterIPs come from
// ServiceCIDR. The host holds an interface, HostLink (a bridge without
// ports: this kernel has no dummy driver), that owns the plane's gateway
// address (one in 10.244.0.0/24 per plane) and catches ServiceCIDR (a
// ClusterIP needs a route for kube-proxy's DNAT to see the packet); PodCIDR
// outside the pods' /32 routes is unreachable, so a connection to a pod
// that is gone fails at once (as on loopback) instead of hanging. Neither
// range ever follows the machine's default route. Each pod's namespace has
// one veth, eth0, with its pod IP and routes to PodCIDR and ServiceCIDR
// through the gateway (no default route: a pod reaches nothing else); the
// host end of the veth (named VethPrefix...) carries the route to the pod
// IP. All traffic between pods is routed by the host, so one iptables rule
// on a pod IP (in FORWARD for other pods, OUTPUT/INPUT for host processes)
// cuts both directions.
//
// Real nodes (package realnode) bring their own pods' namespaces (the CNI
// bridge plugin makes them); each gets a bridge of its own, named
// BridgePrefix<k>, holding 10.244.<192+k>.1/24 (the node's IP and its pods'
// gateway) inside NodeCIDRs, a range the allocator here never hands out;
// see AddBridge.
//
// The FORWARD chain jumps first to GuardChain, which lets through what is
// forwarded between pod interfaces (pod veths and node bridges, in any
// combination) and drops anything else they send or receive, so no pod
// packet leaves the machine.
//
// Every namespace made is recorded in <stateDir>/netns/, as is every node
// bridge; Open removes the namespaces and bridges recorded by an earlier
// run that crashed, with their veths and host routes.
package podnet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

const (
	// PodCIDR holds the pod IPs: 10.244.1.0 to 10.244.191.255 for the
	// namespaces made here; the first /24 holds the planes' gateways, and
	// NodeCIDRs the real nodes' bridges.
	PodCIDR = "10.244.0.0/16"
	// NodeCIDRs is the part of PodCIDR kept for real nodes: bridge k (1 to
	// 63) has the /24 10.244.<192+k>.0/24.
	NodeCIDRs = "10.244.192.0/18"
	// BridgePrefix starts the name of every real node's bridge.
	BridgePrefix = "lpc"
	// GuardChain is the filter-table chain that FORWARD jumps to first: it
	// drops whatever a pod interface (VethPrefix..., BridgePrefix...)
	// exchanges with any other interface.
	GuardChain = "LOCALPLANE-GUARD"
	// ServiceCIDR is the Services' ClusterIP range in this mode.
	ServiceCIDR = "10.96.0.0/16"
	// HostLink is the host interface (a bridge without ports) that owns the
	// gateways and catches unassigned ClusterIPs.
	HostLink = "lp0"
	// VethPrefix starts the host-side name of every pod veth.
	VethPrefix = "lpv"
	// NamespacePrefix starts the name of every pod network namespace
	// (under /run/netns, as `ip netns` keeps them).
	NamespacePrefix = "lp-"
)

// Network is the plane's pod network.
type Network struct {
	// Gateway is the host's address as pods see it (on HostLink and on the
	// host end of every pod veth), for services the host offers to pods.
	Gateway string
	dir     string
	mu      sync.Mutex
	used    map[string]bool
}

// Pod is one pod's network namespace.
type Pod struct {
	// IP is the pod IP, the only address of the namespace's eth0.
	IP string
	// Namespace is the name under /run/netns.
	Namespace string
	veth      string
}

// Path is the namespace's file, for nsenter --net=.
func (p Pod) Path() string { return filepath.Join("/run/netns", p.Namespace) }

// Open sets up the host side (HostLink with a gateway, the catch-all
// routes, IPv4 forwarding and the FORWARD guard rules) and removes the
// namespaces an earlier run with the same state directory left behind.
// The gateway recorded by an earlier run is kept, so addresses in its
// certificates stay valid. Needs root.
func Open(stateDir string) (*Network, error) {
	dir := filepath.Join(stateDir, "netns")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	n := &Network{dir: dir, used: map[string]bool{}}
	if err := n.sweep(); err != nil {
		return nil, fmt.Errorf("podnet: removing namespaces of an earlier run: %w", err)
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
// plane doing the same never opens a gap), makes FORWARD jump to it first,
// and removes the two FORWARD rules earlier versions guarded pod veths
// with (they would cut pod veths off from node bridges).
func guardSetup() error {
	var rules strings.Builder
	fmt.Fprintf(&rules, "*filter\n:%s - [0:0]\n", GuardChain)
	pods := []string{VethPrefix + "+", BridgePrefix + "+"}
	for _, in := range pods {
		for _, out := range pods {
			fmt.Fprintf(&rules, "-A %s -i %s -o %s -j RETURN\n", GuardChain, in, out)
		}
	}
	for _, dev := range pods {
		fmt.Fprintf(&rules, "-A %s -i %s -j DROP\n-A %[1]s -o %[2]s -j DROP\n", GuardChain, dev)
	}
	rules.WriteString("COMMIT\n")
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
	for _, legacy := range [][]string{
		{"FORWARD", "-i", VethPrefix + "+", "!", "-o", VethPrefix + "+", "-j", "DROP"},
		{"FORWARD", "-o", VethPrefix + "+", "!", "-i", VethPrefix + "+", "-j", "DROP"},
	} {
		for exec.Command("iptables", append([]string{"-w", "-D"}, legacy...)...).Run() == nil {
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
// (HostLink, the routes and the guard rules stay for other planes). Pods
// must be removed first.
func (n *Network) Close() error {
	return run("ip", "addr", "del", n.Gateway+"/32", "dev", HostLink)
}

// Add makes a network namespace with a fresh pod IP and records it.
func (n *Network) Add() (Pod, error) {
	ip, err := n.allocate()
	if err != nil {
		return Pod{}, err
	}
	id := make([]byte, 4)
	if _, err := rand.Read(id); err != nil {
		return Pod{}, err
	}
	p := Pod{IP: ip, Namespace: NamespacePrefix + hex.EncodeToString(id), veth: VethPrefix + hex.EncodeToString(id)}
	if err := os.WriteFile(filepath.Join(n.dir, p.Namespace), []byte(ip+"\n"), 0o644); err != nil {
		n.release(ip)
		return Pod{}, err
	}
	ns := []string{"ip", "-n", p.Namespace}
	steps := [][]string{
		{"ip", "netns", "add", p.Namespace},
		{"ip", "link", "add", p.veth, "type", "veth", "peer", "name", "eth0", "netns", p.Namespace},
		append(ns, "link", "set", "lo", "up"),
		append(ns, "addr", "add", ip+"/32", "dev", "eth0"),
		append(ns, "link", "set", "eth0", "up"),
		append(ns, "route", "add", n.Gateway, "dev", "eth0", "scope", "link", "src", ip),
		append(ns, "route", "add", PodCIDR, "via", n.Gateway, "dev", "eth0", "src", ip),
		append(ns, "route", "add", ServiceCIDR, "via", n.Gateway, "dev", "eth0", "src", ip),
		{"ip", "addr", "add", n.Gateway + "/32", "dev", p.veth},
		{"ip", "link", "set", p.veth, "up"},
		{"ip", "route", "replace", ip + "/32", "dev", p.veth, "src", n.Gateway},
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			_ = n.Remove(p)
			return Pod{}, fmt.Errorf("podnet: %w", err)
		}
	}
	return p, nil
}

// Remove deletes a pod's veth pair (its host route goes with it), its
// namespace and its record, and frees its IP.
func (n *Network) Remove(p Pod) error {
	err := deleteNamespace(p.Namespace)
	if err == nil {
		err = os.Remove(filepath.Join(n.dir, p.Namespace))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	}
	n.release(p.IP)
	return err
}

// Sweep removes what the pod network of a plane in stateDir that was
// killed left: every recorded namespace (with its veth and host route) and
// node bridge; Open does the same. A state directory without a pod
// network is no error. Needs root.
func Sweep(stateDir string) error {
	n := &Network{dir: filepath.Join(stateDir, "netns"), used: map[string]bool{}}
	if err := n.sweep(); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("podnet: %w", err)
	}
	return nil
}

// sweep deletes every recorded namespace and node bridge (the bridges'
// records stay, so a node keeps its address).
func (n *Network) sweep() error {
	entries, err := os.ReadDir(n.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if node, ok := strings.CutPrefix(e.Name(), bridgeRecordPrefix); ok {
			errs = append(errs, n.RemoveBridge(node))
			continue
		}
		if !strings.HasPrefix(e.Name(), NamespacePrefix) {
			continue
		}
		if err := deleteNamespace(e.Name()); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.Remove(filepath.Join(n.dir, e.Name())))
	}
	return errors.Join(errs...)
}

// deleteNamespace deletes the host end of the namespace's veth (which
// destroys the pair and the host route at once; the namespace itself goes
// away asynchronously once its last process has) and then the namespace.
func deleteNamespace(name string) error {
	veth := VethPrefix + strings.TrimPrefix(name, NamespacePrefix)
	if out, err := exec.Command("ip", "link", "del", veth).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
		return fmt.Errorf("ip link del %s: %v: %s", veth, err, strings.TrimSpace(string(out)))
	}
	out, err := exec.Command("ip", "netns", "del", name).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "No such file") {
		return fmt.Errorf("ip netns del %s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// allocate picks a free pod IP below NodeCIDRs: not handed out here, and
// no route on the machine to it (another plane's pod).
func (n *Network) allocate() (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	routed, err := hostRoutes()
	if err != nil {
		return "", err
	}
	for range 1000 {
		k, err := rand.Int(rand.Reader, big.NewInt(191*256))
		if err != nil {
			return "", err
		}
		v := k.Int64() + 256
		ip := net.IPv4(10, 244, byte(v>>8), byte(v)).String()
		if byte(v) == 0 || byte(v) == 255 || n.used[ip] || routed[ip] {
			continue
		}
		n.used[ip] = true
		return ip, nil
	}
	return "", errors.New("podnet: no free pod IP in " + PodCIDR)
}

func (n *Network) release(ip string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.used, ip)
}

// hostRoutes lists the destinations of host routes to single addresses in
// PodCIDR.
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
