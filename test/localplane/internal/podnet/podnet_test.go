package podnet

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNamespaces makes two pod namespaces with a redis-server in the
// first, and checks that a connection from the second leaves from its own
// pod IP, that the host reaches the pod from the gateway, and that a
// second Open on the same state directory (a restart after a crash)
// removes the namespaces the first left. Needs root, iproute2, iptables
// and redis-server.
func TestNamespaces(t *testing.T) {
	dir := t.TempDir()
	n, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	p1, err := n.Add()
	if err != nil {
		t.Fatal(err)
	}
	p2, err := n.Add()
	if err != nil {
		t.Fatal(err)
	}
	if p1.IP == p2.IP {
		t.Fatalf("both pods got %s", p1.IP)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	server := exec.CommandContext(ctx, "nsenter", "--net="+p1.Path(), "redis-server",
		"--port", "6379", "--protected-mode", "no", "--save", "", "--appendonly", "no")
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })

	clients := func(from string) string {
		args := []string{"redis-cli", "-h", p1.IP, "client", "list"}
		if from != "" {
			args = append([]string{"nsenter", "--net=" + from}, args...)
		}
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
	if got := clients(p2.Path()); !strings.Contains(got, "addr="+p2.IP+":") {
		t.Errorf("a client in the second namespace shows as %q, want addr=%s:...", got, p2.IP)
	}
	if got := clients(""); !strings.Contains(got, "addr="+n.Gateway+":") {
		t.Errorf("a client on the host shows as %q, want addr=%s:... (the gateway)", got, n.Gateway)
	}
	if ip := net.ParseIP(p1.IP); !ip.IsPrivate() {
		t.Errorf("pod IP %s is not in a private range", ip)
	}

	// A restart after a crash: the records of both namespaces are swept.
	_ = server.Process.Kill()
	_ = server.Wait()
	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.Gateway != n.Gateway {
		t.Errorf("gateway after restart %s, want the recorded %s", again.Gateway, n.Gateway)
	}
	for _, p := range []Pod{p1, p2} {
		if _, err := os.Stat(p.Path()); err == nil {
			t.Errorf("namespace %s survived the sweep", p.Namespace)
		}
		if _, err := os.Stat(filepath.Join(dir, "netns", p.Namespace)); err == nil {
			t.Errorf("record of %s survived the sweep", p.Namespace)
		}
		if out, _ := exec.Command("ip", "route", "show", p.IP+"/32").Output(); len(out) > 0 {
			t.Errorf("host route to %s survived the sweep: %s", p.IP, out)
		}
		// A pod that is gone is unreachable at once, not a silent drop.
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(p.IP, "6379"), 5*time.Second); !errors.Is(err, syscall.EHOSTUNREACH) {
			if c != nil {
				c.Close()
			}
			t.Errorf("dialing the removed pod %s: %v, want EHOSTUNREACH", p.IP, err)
		}
	}
}

// TestBridges gives two real nodes their bridges: distinct /24s in
// NodeCIDRs with the gateway on the bridge and a route to the subnet; a
// pod namespace reaches a bridge's address; an Open after a crash removes
// the bridges and a node then gets its recorded bridge back; a plane never
// takes or removes another plane's bridge.
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
	pod, err := n.Add()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(b1.Gateway, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dial := "exec 3<>/dev/tcp/" + b1.Gateway + "/" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if out, err := exec.Command("nsenter", "--net="+pod.Path(), "bash", "-c", dial).CombinedOutput(); err != nil {
		t.Errorf("connecting to %s from a pod: %v: %s", l.Addr(), err, out)
	}

	again, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("ip", "link", "show", b1.Name).Run(); err == nil {
		t.Errorf("bridge %s survived the sweep", b1.Name)
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
