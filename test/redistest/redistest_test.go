package redistest

import (
	"strings"
	"testing"
	"time"
)

func waitClusterOK(t *testing.T, n *Node) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(n.Do("CLUSTER", "INFO").(string), "cluster_state:ok") {
		if time.Now().After(deadline) {
			t.Fatal("cluster_state not ok")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNodeLifecycle(t *testing.T) {
	n := StartOne(t, Options{Password: "s3cret"})
	id := n.Do("CLUSTER", "MYID").(string)
	if len(id) != 40 {
		t.Fatalf("CLUSTER MYID = %q", id)
	}
	n.Do("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
	waitClusterOK(t, n)
	n.Do("SET", "{a}k", "v")

	// SIGTERM saves: the key and the node ID survive a restart on a new port.
	oldPort := n.Port()
	n.Stop()
	if n.Running() {
		t.Fatal("still running after Stop")
	}
	n.RestartOnNewPort()
	waitClusterOK(t, n)
	if n.Port() == oldPort {
		t.Fatalf("port unchanged: %d", oldPort)
	}
	if got := n.Do("CLUSTER", "MYID").(string); got != id {
		t.Fatalf("node ID changed across restart: %s -> %s", id, got)
	}
	if got := n.Do("GET", "{a}k"); got != "v" {
		t.Fatalf("GET after restart = %v", got)
	}

	// Kill and wipe: a fresh node with a new ID on the same port.
	n.Kill()
	n.Wipe()
	n.Restart()
	if got := n.Do("CLUSTER", "MYID").(string); got == id {
		t.Fatal("wiped node kept its ID")
	}
	if info := n.Do("CLUSTER", "INFO").(string); !strings.Contains(info, "cluster_known_nodes:1") {
		t.Fatalf("wiped node knows other nodes: %s", info)
	}
}

func TestAppendFsyncAlwaysSurvivesKill(t *testing.T) {
	n := StartOne(t, Options{AppendFsyncAlways: true})
	n.Do("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
	waitClusterOK(t, n)
	n.Do("SET", "k", "v")
	n.Kill()
	n.Restart()
	waitClusterOK(t, n)
	if got := n.Do("GET", "k"); got != "v" {
		t.Fatalf("GET after kill -9 = %v", got)
	}
}

// Nodes on their own addresses talk from them, so Cut separates exactly two of them: each
// flags the other failing, a third node still sees both, and healing restores the link.
func TestOwnAddressAndCut(t *testing.T) {
	nodes := Start(t, 3, Options{OwnAddress: true, NodeTimeout: time.Second})
	a, b, c := nodes[0], nodes[1], nodes[2]
	if a.IP() == b.IP() || a.IP() == "127.0.0.1" {
		t.Fatalf("addresses %s %s", a.IP(), b.IP())
	}
	a.Do("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
	for _, n := range []*Node{b, c} {
		a.Do("CLUSTER", "MEET", n.IP(), n.Port())
	}
	for _, n := range nodes {
		waitClusterOK(t, n)
	}
	sees := func(viewer, target *Node, flag string) bool {
		for _, line := range strings.Split(viewer.Do("CLUSTER", "NODES").(string), "\n") {
			if strings.Contains(line, target.Addr()+"@") {
				return strings.Contains(line, flag)
			}
		}
		return false
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor("b to know a", func() bool { return sees(b, a, "connected") })
	heal := Cut(t, a, b)
	waitFor("b to flag a", func() bool { return sees(b, a, "fail") })
	if sees(c, a, "fail") || sees(c, b, "fail") {
		t.Fatal("the third node lost a link too")
	}
	heal()
	waitFor("b to see a again", func() bool { return !sees(b, a, "fail") })
}
