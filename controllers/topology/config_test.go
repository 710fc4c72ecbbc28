package topology

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// ApplyConfig sets live config on every node and writes nothing to its disk.
func TestApplyConfig(t *testing.T) {
	c := newTestCluster(t, redistest.Options{Password: "cfg"}, Options{})
	all := c.addShards(2, 1)
	d := c.desired(0, all)
	ctx := context.Background()
	confs := map[string][]byte{}
	for _, s := range all {
		n := c.nodes[s][0]
		b, err := os.ReadFile(filepath.Join(n.Dir, "redis.conf"))
		if err != nil {
			t.Fatal(err)
		}
		confs[n.Dir] = b
	}
	if err := c.engine.ApplyConfig(ctx, d.endpoints(), map[string]string{"maxmemory-policy": "allkeys-lru", "hz": "20"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		n := c.nodes[s][0]
		got := n.Do("CONFIG", "GET", "maxmemory-policy").([]any)
		if got[1] != "allkeys-lru" {
			t.Fatalf("maxmemory-policy = %v", got)
		}
		conf, err := os.ReadFile(filepath.Join(n.Dir, "redis.conf"))
		if err != nil || string(conf) != string(confs[n.Dir]) {
			t.Fatalf("redis.conf changed on disk (%v):\n%s", err, conf)
		}
	}
	err := c.engine.ApplyConfig(ctx, d.endpoints(), map[string]string{"maxmemory": "lots"})
	if err == nil || !strings.Contains(err.Error(), "s0-0") || !strings.Contains(err.Error(), "s1-0") {
		t.Fatalf("bad value: %v", err)
	}
	bad := New(Options{Password: "wrong"})
	if err := bad.ApplyConfig(ctx, d.endpoints(), map[string]string{"hz": "10"}); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := bad.Reconcile(ctx, d, nil); !errors.Is(err, ErrAuth) {
		t.Fatalf("Reconcile with a wrong password: %v", err)
	}
}
