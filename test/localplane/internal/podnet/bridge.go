package podnet

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// bridgeRecordPrefix starts the name of a node bridge's record in the
// netns directory (bridge-<node>, holding k).
const bridgeRecordPrefix = "bridge-"

// maxBridges is how many node bridges fit in NodeCIDRs (k = 1 to 63).
const maxBridges = 63

// Bridge is a real node's bridge, to which the CNI bridge plugin attaches
// the node's pods.
type Bridge struct {
	// Name is the interface, BridgePrefix<k>.
	Name string
	// Subnet is the node's pod range, 10.244.<192+k>.0/24.
	Subnet string
	// Gateway is the bridge's address, 10.244.<192+k>.1: the node's IP and
	// its pods' gateway.
	Gateway string
}

func bridgeFor(k int) Bridge {
	return Bridge{
		Name:    BridgePrefix + strconv.Itoa(k),
		Subnet:  fmt.Sprintf("10.244.%d.0/24", 192+k),
		Gateway: fmt.Sprintf("10.244.%d.1", 192+k),
	}
}

// AddBridge makes node's bridge, up, with Gateway/24 (so its subnet routes
// to it, more specific than PodCIDR's unreachable route): the bridge
// recorded for node by an earlier run in this state directory (taken over
// if it still exists and is marked as this node's), else a free one (no
// interface of that name, no route to its subnet), which is recorded. The
// bridge's interface alias names its owner (this state directory and
// node), so that no plane ever takes or removes another's. Bridged traffic
// is made to cross iptables (net.bridge.bridge-nf-call-iptables=1), so
// kube-proxy's DNAT works between two pods of one node and GuardChain sees
// them. Errors when all 63 are taken or a command fails.
func (n *Network) AddBridge(node string) (Bridge, error) {
	record := filepath.Join(n.dir, bridgeRecordPrefix+node)
	owner := n.bridgeOwner(node)
	if k, err := readBridgeRecord(record); err != nil {
		return Bridge{}, err
	} else if k > 0 {
		br := bridgeFor(k)
		out, err := exec.Command("ip", "link", "add", br.Name, "type", "bridge").CombinedOutput()
		switch {
		case err == nil:
			return br, n.bridgeUp(br, owner)
		case !strings.Contains(string(out), "File exists"):
			return Bridge{}, fmt.Errorf("podnet: ip link add %s: %v: %s", br.Name, err, strings.TrimSpace(string(out)))
		case ownerOf(br.Name) == owner:
			return br, n.bridgeUp(br, owner)
		}
		// Another plane's now: pick a free one below.
	}
	routed, err := hostRoutes()
	if err != nil {
		return Bridge{}, err
	}
	for k := 1; k <= maxBridges; k++ {
		br := bridgeFor(k)
		if routed[br.Subnet] {
			continue
		}
		// Creating the interface claims k; another plane may win the race.
		if exec.Command("ip", "link", "add", br.Name, "type", "bridge").Run() != nil {
			continue
		}
		if err := os.WriteFile(record, []byte(strconv.Itoa(k)+"\n"), 0o644); err != nil {
			_ = run("ip", "link", "del", br.Name)
			return Bridge{}, err
		}
		return br, n.bridgeUp(br, owner)
	}
	return Bridge{}, errors.New("podnet: no free node bridge in " + NodeCIDRs)
}

// bridgeOwner is the interface alias that marks node's bridge as this
// state directory's.
func (n *Network) bridgeOwner(node string) string {
	sum := sha256.Sum256([]byte(n.dir))
	return "localplane " + hex.EncodeToString(sum[:6]) + " " + node
}

// ownerOf reads interface name's alias, or "" when it has none or does
// not exist.
func ownerOf(name string) string {
	b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "ifalias"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readBridgeRecord reads the k recorded in record, or 0 when there is no
// record.
func readBridgeRecord(record string) (int, error) {
	b, err := os.ReadFile(record)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	k, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || k < 1 || k > maxBridges {
		return 0, fmt.Errorf("podnet: bad bridge record %s", record)
	}
	return k, nil
}

func (n *Network) bridgeUp(br Bridge, owner string) error {
	if err := run("ip", "link", "set", br.Name, "alias", owner); err != nil {
		return fmt.Errorf("podnet: %w", err)
	}
	out, err := exec.Command("ip", "addr", "add", br.Gateway+"/24", "dev", br.Name).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "File exists") && !strings.Contains(string(out), "already assigned") {
		return fmt.Errorf("podnet: ip addr add %s: %v: %s", br.Gateway, err, strings.TrimSpace(string(out)))
	}
	for _, s := range [][]string{
		{"ip", "link", "set", br.Name, "up"},
		{"sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"},
	} {
		if err := run(s...); err != nil {
			return fmt.Errorf("podnet: %w", err)
		}
	}
	return nil
}

// RemoveBridge deletes node's bridge, if it has one (an interface of the
// recorded name marked as this node's), with every port still on it (the
// host ends of its pods' veths; their namespaces lose them); its route
// goes with it. The record stays, so the node gets the same bridge and
// address again unless another plane took it meanwhile.
func (n *Network) RemoveBridge(node string) error {
	k, err := readBridgeRecord(filepath.Join(n.dir, bridgeRecordPrefix+node))
	if err != nil || k == 0 {
		return err
	}
	br := bridgeFor(k)
	if ownerOf(br.Name) != n.bridgeOwner(node) {
		return nil
	}
	out, err := exec.Command("ip", "-o", "link", "show", "master", br.Name).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "does not exist") {
			return nil
		}
		return fmt.Errorf("podnet: ip link show master %s: %v: %s", br.Name, err, strings.TrimSpace(string(out)))
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		port, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if out, err := exec.Command("ip", "link", "del", port).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
			errs = append(errs, fmt.Errorf("podnet: ip link del %s: %v: %s", port, err, strings.TrimSpace(string(out))))
		}
	}
	if out, err := exec.Command("ip", "link", "del", br.Name).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
		errs = append(errs, fmt.Errorf("podnet: ip link del %s: %v: %s", br.Name, err, strings.TrimSpace(string(out))))
	}
	return errors.Join(errs...)
}
