//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis-operator/redis-operator/cmd/redis-operator/statusview"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestStatusCommand: `redis-operator status` against a real
// 3×1 cluster on the plane, with keys written through a cluster client:
// the JSON report names every shard with its master and replica, the
// masters' slot ranges cover all 16384 slots, the key count is what was
// written, and the tables printed by the same binary run as the kubectl
// plugin (`kubectl rediscluster status`, through a kubectl-rediscluster
// symlink on the PATH) show the same, without the password.
func TestStatusCommand(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	t.Run("3x1", func(t *testing.T) {
		scenario(t, "status-cmd/3x1")
		const name, keys = "status-cmd", 300
		c := newCluster(t, name, nil)
		c.waitReady(5 * time.Minute)

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cl := c.clusterClient()
		for i := range keys {
			if err := cl.Set(ctx, fmt.Sprintf("status:%d", i), "v", 0).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
		}

		kubeconfig := filepath.Join(env.stateDir, "kubeconfig")
		bin := filepath.Join(env.binDir, "redis-operator")
		out, stderr, err := runCmd(exec.Command(bin, "status", name, "-n", c.ns, "--kubeconfig", kubeconfig, "-o", "json"))
		if err != nil {
			t.Fatalf("status -o json: %v\n%s", err, stderr)
		}
		var r statusview.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("the JSON does not parse: %v\n%s", err, out)
		}
		slots := 0
		for i, sh := range r.ShardList {
			if want := resources.StatefulSetName(name, i); sh.Name != want {
				t.Fatalf("shard %d is %q, want %q", i, sh.Name, want)
			}
			if len(sh.Nodes) != 2 || sh.Nodes[0].Role != "master" || sh.Nodes[0].Pod != sh.Master || sh.Nodes[1].Role != "replica" {
				t.Fatalf("shard %s: want its master then one replica, got %+v", sh.Name, sh.Nodes)
			}
			for _, n := range sh.Nodes {
				if n.Error != "" || !n.Ready || len(n.NodeID) != 40 || n.UsedMemory <= 0 {
					t.Fatalf("shard %s node %s not read: %+v", sh.Name, n.Pod, n)
				}
			}
			if rep := sh.Nodes[1]; rep.LagBytes == nil || !rep.MasterLinkUp {
				t.Fatalf("replica %s: no replication lag or link down: %+v", rep.Pod, rep)
			}
			slots += sh.SlotCount
		}
		if len(r.ShardList) != 3 || slots != 16384 || r.SlotsServed != 16384 {
			t.Fatalf("%d shards with %d slots (served %d), want 3 with 16384:\n%s", len(r.ShardList), slots, r.SlotsServed, out)
		}
		if r.Cluster == nil || r.Cluster.State != "ok" || r.Cluster.SlotsOK != 16384 {
			t.Fatalf("cluster info %+v, want state ok with 16384 slots ok", r.Cluster)
		}
		if r.Keys != keys {
			t.Fatalf("the report counts %d keys, %d were written", r.Keys, keys)
		}
		if r.Phase != "Ready" || r.PodsReady != 6 || len(r.Conditions) == 0 || len(r.Events) == 0 {
			t.Fatalf("phase %s, %d pods ready, %d conditions, %d events", r.Phase, r.PodsReady, len(r.Conditions), len(r.Events))
		}

		// The same binary as a kubectl plugin, through kubectl itself.
		dir := t.TempDir()
		if err := os.Symlink(bin, filepath.Join(dir, "kubectl-rediscluster")); err != nil {
			t.Fatal(err)
		}
		// bin/kubectl (built at the API server's release by `make tools`) when
		// present, else the one on the PATH.
		kubectl := filepath.Join(env.binDir, "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			kubectl = "kubectl"
		}
		cmd := exec.Command(kubectl, "rediscluster", "status", name, "-n", c.ns)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
		text, stderr, err := runCmd(cmd)
		if err != nil {
			t.Fatalf("kubectl rediscluster status: %v\n%s", err, stderr)
		}
		want := []string{"RedisCluster " + c.ns + "/" + name, "Slots served:  16384/16384", fmt.Sprintf("Keys:          %d", keys), "state ok"}
		for _, sh := range r.ShardList {
			want = append(want, sh.Name, strings.Join(sh.Slots, ","))
			for _, n := range sh.Nodes {
				want = append(want, n.Pod)
			}
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Fatalf("the table lacks %q:\n%s", w, text)
			}
		}
		if pw := c.password(); pw == "" || strings.Contains(text+out+stderr, pw) {
			t.Fatalf("the password is empty or was printed")
		}
		t.Logf("3 shards, %d slots, %d keys, %d events; the table:\n%s", r.SlotsServed, r.Keys, len(r.Events), text)
	})
}

// runCmd runs cmd and returns its stdout and stderr.
func runCmd(cmd *exec.Cmd) (string, string, error) {
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}
