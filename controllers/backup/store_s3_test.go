package backup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/test/redistest"
	"github.com/redis-operator/redis-operator/test/s3test"
)

// TestTakeAndFetch runs a backup of two shards (two nodes owning half the
// slots each) into SeaweedFS's S3 gateway and restores each into a fresh
// node with appendonly yes: every key is back, served by the restored
// node. Then the failures: a wrong secret key and a missing bucket are
// told apart, a download whose checksum disagrees with the manifest leaves
// nothing behind, and a node that ran already is not overwritten.
func TestTakeAndFetch(t *testing.T) {
	srv := s3test.Start(t)
	srv.MakeBucket(t, "backups")
	spec := &cachev1beta1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: "backups", Region: "us-east-1", ForcePathStyle: true}
	keys := Keys{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}
	store, err := NewStore(spec, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := store.Check(ctx); err != nil {
		t.Fatal(err)
	}

	opts := redistest.Options{Password: "pw", Extra: []string{"cluster-require-full-coverage no"}}
	nodes := redistest.Start(t, 2, opts)
	nodes[0].Do("CLUSTER", "ADDSLOTSRANGE", "0", "8191")
	nodes[1].Do("CLUSTER", "ADDSLOTSRANGE", "8192", "16383")
	clients := make([]*redis.Client, 2)
	for i, n := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.Addr(), Password: "pw", Protocol: 2, DisableIdentity: true})
		defer clients[i].Close()
		waitClusterOK(t, clients[i])
	}
	// Each key goes to the node that serves its slot.
	const total = 4000
	owner := map[int][]string{}
	for i := range total {
		k := "key:" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + ":" + strconv.Itoa(i)
		slot, err := clients[0].ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		if slot >= 8192 {
			n = 1
		}
		if err := clients[n].Set(ctx, k, "v-"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
		owner[n] = append(owner[n], k)
	}

	path := BackupPath(&cachev1beta1.ObjectStoreSpec{Prefix: "redis"}, "ns", "demo", "b1")
	sources := []Source{
		{Shard: "demo-shard-0", Pod: "demo-shard-0-1", Role: "replica", Addr: nodes[0].Addr(), Slots: []string{"0-8191"}},
		{Shard: "demo-shard-1", Pod: "demo-shard-1-1", Role: "replica", Addr: nodes[1].Addr(), Slots: []string{"8192-16383"}},
	}
	progress := NewProgress(len(sources))
	shards, version, err := Take(ctx, store, path, sources, "pw", 10*time.Second, progress)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "7.") {
		t.Fatalf("redis version %q", version)
	}
	if exists, err := store.Exists(ctx, ManifestKey(path)); err != nil || exists {
		t.Fatalf("Take wrote a manifest (%v, %v): only the caller writes it, last", exists, err)
	}
	m := &Manifest{Format: ManifestFormat, Namespace: "ns", Cluster: "demo", Backup: "b1", RedisVersion: version, Shards: shards}
	if err := WriteManifest(ctx, store, path, m); err != nil {
		t.Fatal(err)
	}
	for i, s := range shards {
		if got := progress.BytesRead(i); got != s.Size {
			t.Errorf("shard %d: progress counted %d bytes, the upload %d", i, got, s.Size)
		}
		if s.NodeID != nodes[i].Do("CLUSTER", "MYID") {
			t.Errorf("shard %d node ID %q", i, s.NodeID)
		}
		r, err := store.Get(ctx, s.ObjectKey)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		_ = r.Close()
		sum := sha256.Sum256(b)
		if err != nil || int64(len(b)) != s.Size || hex.EncodeToString(sum[:]) != s.SHA256 || !strings.HasPrefix(string(b), "REDIS00") {
			t.Fatalf("shard %d object: %d bytes (manifest %d), sha %x (manifest %s), %v", i, len(b), s.Size, sum, s.SHA256, err)
		}
	}

	for i := range 2 {
		dst := redistest.StartOne(t, redistest.Options{AppendFsyncAlways: true, Extra: opts.Extra})
		dst.Stop()
		dst.Wipe()
		if _, err := Fetch(ctx, store, path, i, dst.Dir); err != nil {
			t.Fatal(err)
		}
		if _, err := Fetch(ctx, store, path, i, dst.Dir); !errors.Is(err, ErrAlreadyStarted) {
			t.Fatalf("a second fetch into the same directory: %v, want ErrAlreadyStarted", err)
		}
		dst.Restart()
		c := dst.Client()
		waitClusterOK(t, c)
		if n, err := c.DBSize(ctx).Result(); err != nil || n != int64(len(owner[i])) {
			t.Fatalf("shard %d restored with %d keys (%v), want %d", i, n, err, len(owner[i]))
		}
		for _, k := range owner[i] {
			if v, err := c.Get(ctx, k).Result(); err != nil || v != "v-"+k {
				t.Fatalf("shard %d: %s = %q, %v", i, k, v, err)
			}
		}
	}

	// Failures, each with its own reason.
	bad, _ := NewStore(spec, Keys{AccessKeyID: s3test.AccessKey, SecretAccessKey: "wrong"}, nil)
	if err := bad.Check(ctx); !errors.Is(err, ErrAccessDenied) || Reason(err) != cachev1beta1.BackupAccessDeniedReason {
		t.Fatalf("a wrong secret key: %v (reason %s)", err, Reason(err))
	}
	missing, _ := NewStore(&cachev1beta1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: "nope", ForcePathStyle: true}, keys, nil)
	if err := missing.Check(ctx); !errors.Is(err, ErrNoSuchBucket) || Reason(err) != cachev1beta1.BackupNoSuchBucketReason {
		t.Fatalf("a missing bucket: %v (reason %s)", err, Reason(err))
	}
	m.Shards[0].SHA256 = strings.Repeat("0", 64)
	if err := WriteManifest(ctx, store, path, m); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Fetch(ctx, store, path, 0, dir); err == nil || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("a checksum mismatch: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a failed fetch left %v", entries)
	}
	if _, err := os.Stat(filepath.Join(dir, "dump.rdb")); !os.IsNotExist(err) {
		t.Fatal(err)
	}
}
