package backup

import (
	"strings"
	"testing"
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
