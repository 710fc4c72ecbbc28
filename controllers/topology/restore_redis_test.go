package topology

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/redis-operator/redis-operator/test/redistest"
)

// TestFormFromRestoredRDBs: a cluster restored from a backup is formed
// from nodes that already hold keys. Each shard's first node of a new 3×1
// cluster starts from the RDB of a master of a formed one (as restore-fetch
// leaves it); Redis takes the slots it holds keys of, the engine assigns
// the empty ones, forms the cluster and attaches the empty replicas, and
// every key is served with its value.
func TestFormFromRestoredRDBs(t *testing.T) {
	src := newTestCluster(t, redistest.Options{}, Options{})
	shards, d := src.form(3, 2)
	data := redistest.Dataset{Prefix: "r", Keys: 5000}
	redistest.Load(t, src.client(d), data)
	var rdbs [][]byte
	for _, s := range shards {
		for _, n := range src.nodes[s] {
			if role := n.Do("ROLE").([]any); role[0] != "master" {
				continue
			}
			n.Do("SAVE")
			b, err := os.ReadFile(filepath.Join(n.Dir, "dump.rdb"))
			if err != nil {
				t.Fatal(err)
			}
			rdbs = append(rdbs, b)
		}
	}
	if len(rdbs) != 3 {
		t.Fatalf("%d masters found, want 3", len(rdbs))
	}

	dst := newTestCluster(t, redistest.Options{}, Options{})
	names := dst.addShards(3, 2)
	for i, s := range names {
		n := dst.nodes[s][0]
		n.Stop()
		n.Wipe()
		if err := os.WriteFile(filepath.Join(n.Dir, "dump.rdb"), rdbs[i], 0o600); err != nil {
			t.Fatal(err)
		}
		n.Restart()
		if got := n.Do("DBSIZE").(int64); got == 0 {
			t.Fatalf("shard %s restored empty", s)
		}
	}
	dd := dst.desired(1, names)
	dst.assertShape(dd, dst.reconcile(dd, nil))
	redistest.Verify(t, dst.client(dd), data)
}
