package backup

import (
	"context"
	"errors"
	"strings"
	"testing"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

func TestNewerThanImage(t *testing.T) {
	for _, c := range []struct {
		version, image string
		want           bool
	}{
		{"7.0.15", "redis:7.0", false},
		{"7.0.15", "redis:7.2.4-alpine", false},
		{"7.2.4", "redis:7.0", true},
		{"8.0.0", "docker.io/library/redis:7.4", true},
		{"7.0.15", "registry:5000/redis:6.2", true},
		{"7.0.15", "redis:latest", false},            // no version in the tag: nothing to compare
		{"7.0.15", "registry:5000/redis", false},     // the port is not a tag
		{"7.0.15", "redis@sha256:0123abcd", false},   // a digest only
		{"7.2.0", "redis:7.0@sha256:0123abcd", true}, // the tag beside a digest
		{"garbage", "redis:7.0", false},
	} {
		if got := NewerThanImage(c.version, c.image); got != c.want {
			t.Errorf("NewerThanImage(%q, %q) = %v, want %v", c.version, c.image, got, c.want)
		}
	}
}

func TestCheckRestorable(t *testing.T) {
	if err := CheckRestorable(3, "7.0.15", 3, "redis:7.0"); err != nil {
		t.Fatal(err)
	}
	if err := CheckRestorable(3, "7.0.15", 4, "redis:7.0"); err == nil || !strings.Contains(err.Error(), "the backup has 3 shards and spec.shards is 4") {
		t.Fatalf("another shard count: %v", err)
	}
	if err := CheckRestorable(3, "7.2.4", 3, "redis:7.0"); err == nil || !strings.Contains(err.Error(), "newer than image redis:7.0") {
		t.Fatalf("a newer Redis: %v", err)
	}
}

func TestParseManifestRejectsIncomplete(t *testing.T) {
	for name, doc := range map[string]string{
		"format":   `{"format": 2, "shards": [{"objectKey": "a", "sha256": "` + strings.Repeat("a", 64) + `"}]}`,
		"noShards": `{"format": 1, "shards": []}`,
		"noSum":    `{"format": 1, "shards": [{"objectKey": "a"}]}`,
		"json":     `{"format": 1,`,
	} {
		if _, err := ParseManifest(strings.NewReader(doc)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	m, err := ParseManifest(strings.NewReader(`{"format": 1, "redisVersion": "7.0.15", "shards": [{"objectKey": "a", "sha256": "` + strings.Repeat("a", 64) + `", "size": 3}]}`))
	if err != nil || m.RedisVersion != "7.0.15" || m.Shards[0].Size != 3 {
		t.Fatalf("%+v, %v", m, err)
	}
}

// TestCheckManifest: a manifest counts only as the backup it records;
// a mismatch names the manifest's value and the expected one of each field
// that differs, and nothing else of the manifest.
func TestCheckManifest(t *testing.T) {
	m := &Manifest{Format: ManifestFormat, Namespace: "team-a", Cluster: "demo", Backup: "b1", BackupUID: "uid-1",
		ClusterUID: "cluster-uid", RedisVersion: "7.0.99-foreign", Shards: []ManifestShard{{NodeID: "node-secret", ObjectKey: "k"}}}
	want := ManifestIdentity{Namespace: "team-a", Cluster: "demo", Backup: "b1", BackupUID: "uid-1"}
	if err := CheckManifest(m, "p/team-a/demo/b1/manifest.json", want); err != nil {
		t.Fatal(err)
	}
	other := want
	other.Namespace, other.BackupUID = "team-b", "uid-2"
	err := CheckManifest(m, "p/team-b/demo/b1/manifest.json", other)
	if !errors.Is(err, ErrManifestMismatch) {
		t.Fatalf("another namespace and UID: %v", err)
	}
	for _, s := range []string{`namespace "team-a" (expected "team-b")`, `backup UID "uid-1" (expected "uid-2")`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%q lacks %q", err, s)
		}
	}
	for _, s := range []string{"7.0.99-foreign", "node-secret", "cluster-uid"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("%q holds the manifest's %q", err, s)
		}
	}
	// A manifest written before UIDs were recorded: names only. A restore
	// by path knows no UID: names only.
	legacy := *m
	legacy.BackupUID = ""
	if err := CheckManifest(&legacy, "k", want); err != nil {
		t.Fatalf("a manifest without UID: %v", err)
	}
	if err := CheckManifest(m, "k", ManifestIdentity{Namespace: "team-a", Cluster: "demo", Backup: "b1"}); err != nil {
		t.Fatalf("no UID expected: %v", err)
	}
	if err := CheckManifest(&legacy, "k", ManifestIdentity{Namespace: "team-a", Cluster: "other", Backup: "b1"}); !errors.Is(err, ErrManifestMismatch) {
		t.Fatalf("another cluster: %v", err)
	}
}

// TestReadManifestRefusesForeignObjectKeys: a manifest names only objects
// under its own backup's path, so that a restore (and restore-fetch) never
// downloads another namespace's RDB because a manifest says so.
func TestReadManifestRefusesForeignObjectKeys(t *testing.T) {
	f := startFakeS3(t, "bkt")
	store, err := NewStore(&cachev1beta1.ObjectStoreSpec{Endpoint: f.endpoint(), Bucket: "bkt", ForcePathStyle: true}, Keys{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("a", 64)
	for key, ok := range map[string]bool{
		"p/team-a/demo/b1/shard-0.rdb":           true,
		"p/team-b/demo/b1/shard-0.rdb":           false,
		"p/team-a/demo/b1/../../../team-b/x.rdb": false,
		"p/team-a/demo/b10/shard-0.rdb":          false,
	} {
		f.put("p/team-a/demo/b1/manifest.json", []byte(`{"format": 1, "namespace": "team-a", "cluster": "demo", "backup": "b1",
			"shards": [{"objectKey": "`+key+`", "sha256": "`+sum+`"}]}`))
		_, err := ReadManifest(context.Background(), store, "p/team-a/demo/b1")
		if (err == nil) != ok || (!ok && !errors.Is(err, ErrManifestMismatch)) {
			t.Errorf("object key %s: %v, want ok %v", key, err, ok)
		}
	}
}
