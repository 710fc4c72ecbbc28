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
