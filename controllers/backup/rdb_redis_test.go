package backup

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// ownAll gives node every slot (a one-node cluster) and waits for cluster_state:ok.
func ownAll(t *testing.T, n *redistest.Node) {
	t.Helper()
	n.Do("CLUSTER", "ADDSLOTSRANGE", "0", "16383")
	waitClusterOK(t, n.Client())
}

func waitClusterOK(t *testing.T, c *redis.Client) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := c.ClusterInfo(context.Background()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster_state not ok: %v %s", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeKeys sets key:<i> = value:<i> for i in [0, n) on c, pipelined.
func writeKeys(t *testing.T, c *redis.Client, prefix string, n int) {
	t.Helper()
	p := c.Pipeline()
	for i := range n {
		p.Set(context.Background(), fmt.Sprintf("%s:%d", prefix, i), fmt.Sprintf("value:%d", i), 0)
	}
	if _, err := p.Exec(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// checkKeys reads every key of writeKeys from c (so c's node serves their
// slots) and compares the values.
func checkKeys(t *testing.T, c *redis.Client, prefix string, n int) {
	t.Helper()
	p := c.Pipeline()
	cmds := make([]*redis.StringCmd, n)
	for i := range n {
		cmds[i] = p.Get(context.Background(), fmt.Sprintf("%s:%d", prefix, i))
	}
	_, _ = p.Exec(context.Background())
	for i, cmd := range cmds {
		if got, err := cmd.Result(); err != nil || got != fmt.Sprintf("value:%d", i) {
			t.Fatalf("%s:%d = %q, %v; want value:%d", prefix, i, got, err, i)
		}
	}
}

func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".rdb") || strings.HasPrefix(e.Name(), "temp-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestRDBStreamIsAnRDB: DialRDB reads a node's RDB over the replication
// protocol without the node writing any RDB file; the bytes start with the
// RDB magic, and a fresh cluster-mode redis-server started on them has every
// key and serves their slots (Redis takes the unassigned slots it holds keys of).
func TestRDBStreamIsAnRDB(t *testing.T) {
	const keys = 5000
	src := redistest.StartOne(t, redistest.Options{Password: "pw"})
	ownAll(t, src)
	c := redis.NewClient(&redis.Options{Addr: src.Addr(), Password: "pw", Protocol: 2, DisableIdentity: true})
	defer c.Close()
	writeKeys(t, c, "k", keys)
	before := dataFiles(t, src.Dir)

	s, err := DialRDB(context.Background(), src.Addr(), "pw", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := io.ReadAll(s)
	_ = s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(rdb, []byte("REDIS00")) {
		t.Fatalf("payload starts with %q, want REDIS00", rdb[:min(len(rdb), 16)])
	}
	if after := dataFiles(t, src.Dir); !slices.Equal(before, after) {
		t.Fatalf("the node wrote RDB files while streaming: before %v, after %v", before, after)
	}
	if _, err := DialRDB(context.Background(), src.Addr(), "wrong", 10*time.Second); err == nil || !strings.Contains(err.Error(), "AUTH") {
		t.Fatalf("a wrong password: %v, want an AUTH error", err)
	}

	// Not every slot holds one of the keys: the restored node serves the
	// ones it took even though the others have no owner.
	dst := redistest.StartOne(t, redistest.Options{Extra: []string{"cluster-require-full-coverage no"}})
	dst.Stop()
	dst.Wipe()
	if err := os.WriteFile(filepath.Join(dst.Dir, "dump.rdb"), rdb, 0o600); err != nil {
		t.Fatal(err)
	}
	dst.Restart()
	dc := dst.Client()
	waitClusterOK(t, dc)
	if n, err := dc.DBSize(context.Background()).Result(); err != nil || n != keys {
		t.Fatalf("restored DBSIZE %d, %v; want %d", n, err, keys)
	}
	checkKeys(t, dc, "k", keys)
}
