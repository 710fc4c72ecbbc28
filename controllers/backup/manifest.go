package backup

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ManifestFormat is the version of the manifest's layout.
const ManifestFormat = 1

// Manifest is <backup path>/manifest.json: what a restore needs, written
// after every shard's RDB, so that a backup without it is incomplete.
type Manifest struct {
	// Format is ManifestFormat.
	Format int `json:"format"`
	// Namespace and Cluster name the RedisCluster backed up, Backup the
	// RedisClusterBackup.
	Namespace string `json:"namespace"`
	Cluster   string `json:"cluster"`
	Backup    string `json:"backup"`
	// ClusterUID and BackupUID are the metadata.uid of that RedisCluster
	// and RedisClusterBackup. Manifests written before they were recorded
	// lack them (empty): they are then not compared.
	ClusterUID string `json:"clusterUID,omitempty"`
	BackupUID  string `json:"backupUID,omitempty"`
	// StartTime is when the attempt that wrote the RDBs started (RFC 3339):
	// every write acknowledged before it is in the RDBs.
	StartTime time.Time `json:"startTime"`
	// EndTime is when the last RDB was written.
	EndTime time.Time `json:"endTime"`
	// RedisVersion is the redis_version of the nodes read (INFO server).
	RedisVersion string `json:"redisVersion"`
	// Shards in the order a restore maps them to shards 0, 1, ...
	Shards []ManifestShard `json:"shards"`
}

// ManifestShard is one shard's RDB.
type ManifestShard struct {
	Name      string   `json:"name"`
	Pod       string   `json:"pod"`
	NodeID    string   `json:"nodeID"`
	Role      string   `json:"role"`
	Slots     []string `json:"slots"`
	ObjectKey string   `json:"objectKey"`
	Size      int64    `json:"size"`
	SHA256    string   `json:"sha256"`
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ParseManifest reads and checks a manifest: the format, at least one
// shard, every shard with an object key and a SHA-256. Errors name what is
// wrong.
func ParseManifest(r io.Reader) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(io.LimitReader(r, 16<<20))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("manifest: format %d, this operator reads %d", m.Format, ManifestFormat)
	}
	if len(m.Shards) == 0 {
		return nil, fmt.Errorf("manifest: no shard")
	}
	for i, s := range m.Shards {
		if s.ObjectKey == "" || !sha256Hex.MatchString(s.SHA256) {
			return nil, fmt.Errorf("manifest: shard %d has no object key or SHA-256", i)
		}
	}
	return &m, nil
}

// ErrManifestMismatch: the manifest found at a backup's path was written
// for another backup (another namespace, cluster or RedisClusterBackup).
// It is never taken as this backup's, nor restored from in its place.
var ErrManifestMismatch = errors.New("the manifest belongs to another backup")

// ManifestIdentity is what a manifest must record to be the one expected:
// the namespace and cluster backed up, the RedisClusterBackup's name and,
// when known, its UID (empty fields are not compared, so that a restore by
// path, which knows no UID, and manifests written before UIDs were recorded
// still match).
type ManifestIdentity struct {
	Namespace, Cluster, Backup string
	BackupUID                  string
}

// CheckManifest returns nil when m records want, or an error wrapping
// ErrManifestMismatch that names, for each field that differs, the
// manifest's value and the expected one, and nothing else of m. key is the
// manifest's key, for the message.
func CheckManifest(m *Manifest, key string, want ManifestIdentity) error {
	var diffs []string
	cmp := func(field, got, want string) {
		if want != "" && got != want {
			diffs = append(diffs, fmt.Sprintf("%s %s (expected %s)", field, quoteShort(got), quoteShort(want)))
		}
	}
	cmp("namespace", m.Namespace, want.Namespace)
	cmp("cluster", m.Cluster, want.Cluster)
	cmp("backup", m.Backup, want.Backup)
	if m.BackupUID != "" {
		cmp("backup UID", m.BackupUID, want.BackupUID)
	}
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s records %s", ErrManifestMismatch, key, strings.Join(diffs, ", "))
}

// checkObjectKeys returns an error when a shard's object key of m is not
// under backupPath + "/": a manifest names only objects of its own backup.
func checkObjectKeys(m *Manifest, backupPath string) error {
	for i, s := range m.Shards {
		rest, ok := strings.CutPrefix(s.ObjectKey, backupPath+"/")
		if !ok || rest == "" || slices.ContainsFunc(strings.Split(rest, "/"), func(p string) bool { return p == "" || p == "." || p == ".." }) {
			return fmt.Errorf("%w: shard %d's object key is not under %s/", ErrManifestMismatch, i, backupPath)
		}
	}
	return nil
}

// MajorMinor parses the major and minor of a version such as 7.0.15 or
// 7.2; ok is false when v does not start with <digits>.<digits>.
func MajorMinor(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	var err1, err2 error
	major, err1 = strconv.Atoi(parts[0])
	minor, err2 = strconv.Atoi(leadingDigits(parts[1]))
	return major, minor, err1 == nil && err2 == nil
}

func leadingDigits(s string) string {
	for i, c := range s {
		if c < '0' || c > '9' {
			return s[:i]
		}
	}
	return s
}

// ImageVersion is the Redis major.minor an image reference's tag names
// (redis:7.0, redis:7.2.4-alpine, valkey/valkey:8.0); ok is false for a
// tag that names none (latest, a digest only).
func ImageVersion(image string) (major, minor int, ok bool) {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	i := strings.LastIndex(ref, ":")
	if i < 0 || strings.Contains(ref[i:], "/") {
		return 0, 0, false
	}
	return MajorMinor(ref[i+1:])
}

// NewerThanImage says whether a backup of redisVersion cannot be loaded
// by image: Redis refuses an RDB of a newer format than its own, and the
// format changes with minor versions (7.0 writes RDB 10, 7.2 writes 11).
// It is false when either version cannot be parsed (nothing to compare).
func NewerThanImage(redisVersion, image string) bool {
	bm, bn, ok1 := MajorMinor(redisVersion)
	im, in, ok2 := ImageVersion(image)
	if !ok1 || !ok2 {
		return false
	}
	return bm > im || (bm == im && bn > in)
}

// CheckRestorable says why a backup of backupShards shards taken with
// Redis redisVersion cannot bootstrap a cluster of shards shards running
// image, or nil: the shard counts must be equal (restore with the
// recorded count, then scale), and the backup's Redis must be no newer
// than the image's (NewerThanImage).
func CheckRestorable(backupShards int, redisVersion string, shards int32, image string) error {
	if int(shards) != backupShards {
		return fmt.Errorf("the backup has %d shards and spec.shards is %d: restore with spec.shards %d, then scale",
			backupShards, shards, backupShards)
	}
	if NewerThanImage(redisVersion, image) {
		return fmt.Errorf("the backup was taken with Redis %s, newer than image %s: Redis cannot load an RDB of a newer version",
			redisVersion, image)
	}
	return nil
}
