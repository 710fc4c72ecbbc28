package podnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBridges gives two nodes their bridges: distinct /24s in NodeCIDRs
// with the gateway on the bridge and a route to the subnet. A pod on one
// bridge reaches a pod on the other from its own address (routed, no
// NAT: the guard lets traffic between bridges through) and the host's
// services on its bridge's address. An Open after a crash keeps the
// gateway and removes the bridges with their pods' links, after which the
// pods' addresses are unreachable at once; a node then gets its recorded
// bridge back. A plane never takes or removes another plane's bridge.
// Needs root, iproute2, iptables and redis-server.
func TestBridges(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.RemoveBridge("c1")
		_ = n.RemoveBridge("c2")
		_ = n.Close()
	})
	b1, err := n.AddBridge("c1")
	if err != nil {
		t.Fatal(err)
	}
	b2, err := n.AddBridge("c2")
	if err != nil {
		t.Fatal(err)
	}
	_, nodeNet, _ := net.ParseCIDR(NodeCIDRs)
	for _, b := range []Bridge{b1, b2} {
		if !nodeNet.Contains(net.ParseIP(b.Gateway)) || !strings.HasPrefix(b.Name, BridgePrefix) {
			t.Errorf("bridge %+v: want a %s... bridge in %s", b, BridgePrefix, NodeCIDRs)
		}
		if out, _ := exec.Command("ip", "-4", "-o", "route", "show", b.Subnet).Output(); !strings.Contains(string(out), "dev "+b.Name) {
			t.Errorf("route to %s: %q, want it on %s", b.Subnet, out, b.Name)
		}
	}
	if b1.Subnet == b2.Subnet || b1.Name == b2.Name {
		t.Fatalf("both nodes got %+v", b1)
	}

	// A redis-server in a pod on c1, clients in a pod on c2 and on the
	// host.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ns1, ip1 := attachPod(t, b1)
	ns2, ip2 := attachPod(t, b2)
	server := exec.CommandContext(ctx, "ip", "netns", "exec", ns1, "redis-server",
		"--port", "6379", "--protected-mode", "no", "--save", "", "--appendonly", "no")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	clients := func(args ...string) string {
		for ctx.Err() == nil {
			out, err := exec.CommandContext(ctx, args[0], args[1:]...).Output()
			if err == nil && strings.Contains(string(out), "addr=") {
				return string(out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%v never answered", args)
		return ""
	}
	if got := clients("ip", "netns", "exec", ns2, "redis-cli", "-h", ip1, "client", "list"); !strings.Contains(got, "addr="+ip2+":") {
		t.Errorf("a client in the pod on c2 shows as %q, want addr=%s:...", got, ip2)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(b1.Gateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dial := "exec 3<>/dev/tcp/" + b1.Gateway + "/" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if out, err := exec.Command("ip", "netns", "exec", ns1, "bash", "-c", dial).CombinedOutput(); err != nil {
		t.Errorf("connecting to %s from the pod on c1: %v: %s", l.Addr(), err, out)
	}

	// A restart after a crash: the bridges go, with the pods' links.
	_ = server.Process.Kill()
	_ = server.Wait()
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.Gateway != n.Gateway {
		t.Errorf("gateway after restart %s, want the recorded %s", again.Gateway, n.Gateway)
	}
	if err := exec.Command("ip", "link", "show", b1.Name).Run(); err == nil {
		t.Errorf("bridge %s survived the sweep", b1.Name)
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip1, "6379"), 5*time.Second); !errors.Is(err, syscall.EHOSTUNREACH) {
		if c != nil {
			c.Close()
		}
		t.Errorf("dialing the pod %s of a removed bridge: %v, want EHOSTUNREACH", ip1, err)
	}
	b1again, err := again.AddBridge("c1")
	if err != nil {
		t.Fatal(err)
	}
	if b1again != b1 {
		t.Errorf("after the sweep c1 got %+v, want its recorded %+v", b1again, b1)
	}

	// Another plane's node may take c1's bridge while c1 is down (it is
	// the lowest free one): c1 then gets another, and removing c1 leaves
	// the other plane's bridge alone.
	if err := again.RemoveBridge("c1"); err != nil {
		t.Fatal(err)
	}
	other, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ob, err := other.AddBridge("c1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.RemoveBridge("c1"); _ = other.Close() })
	mine, err := again.AddBridge("c1")
	if err != nil {
		t.Fatal(err)
	}
	if mine.Name == ob.Name {
		t.Errorf("c1 of both planes got %s", ob.Name)
	}
	if err := again.RemoveBridge("c1"); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("ip", "link", "show", ob.Name).Run(); err != nil {
		t.Errorf("the other plane's bridge %s went with c1's", ob.Name)
	}
}

// attachPod makes a network namespace attached to br as the CNI bridge
// plugin attaches a node's pod (a veth on the bridge; eth0 with the
// bridge's subnet's .100 and routes to PodCIDR and ServiceCIDR through
// the bridge's address) and returns its name and address. It is deleted
// when t ends.
func attachPod(t *testing.T, br Bridge) (string, string) {
	t.Helper()
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	ns, veth := "lptest-"+hex.EncodeToString(id), "lpt"+hex.EncodeToString(id)
	ip := strings.TrimSuffix(br.Gateway, ".1") + ".100"
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", veth).Run()
		_ = exec.Command("ip", "netns", "del", ns).Run()
	})
	in := []string{"ip", "-n", ns}
	for _, step := range [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "link", "set", veth, "master", br.Name, "up"},
		append(in, "link", "set", "lo", "up"),
		append(in, "addr", "add", ip+"/24", "dev", "eth0"),
		append(in, "link", "set", "eth0", "up"),
		append(in, "route", "add", PodCIDR, "via", br.Gateway),
		append(in, "route", "add", ServiceCIDR, "via", br.Gateway),
	} {
		if err := run(step...); err != nil {
			t.Fatal(err)
		}
	}
	return ns, ip
}
