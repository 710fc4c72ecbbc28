package backup

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// TestBackupPathRefusesEscapes: every part that could take a backup's path
// out of <prefix>/<namespace>/<cluster>/ is refused, and BackupPath joins
// the parts as they are (path.Join turned "team-a" + "../team-b/demo" into
// "team-b/demo/...", another namespace's exact path).
func TestBackupPathRefusesEscapes(t *testing.T) {
	if got := BackupPath(&cachev1beta1.ObjectStoreSpec{Prefix: "p"}, "team-a", "../team-b/demo", "b1"); got != "p/team-a/../team-b/demo/b1" {
		t.Fatalf("BackupPath resolved the parts: %q", got)
	}
	if got := BackupPath(&cachev1beta1.ObjectStoreSpec{}, "ns", "demo", "b1"); got != "ns/demo/b1" {
		t.Fatalf("without a prefix: %q", got)
	}
	for _, c := range []struct {
		prefix, ns, cluster, backup string
		ok                          bool
	}{
		{"", "ns", "demo", "b1", true},
		{"redis/prod", "ns", "demo", "nightly-1700000000", true},
		{".hidden/..x/...", "ns", "demo", "b.1", true}, // dots inside parts are only names
		{"p", "team-a", "../team-b/demo", "b1", false},
		{"p", "team-a", "..", "b1", false},
		{"p", "team-a", "demo/x", "b1", false},
		{"p", "team-a", "Demo", "b1", false},
		{"p", "team-a", strings.Repeat("a", 64), "b1", false},
		{"p", "..", "demo", "b1", false},
		{"p", "team-a", "demo", "..", false},
		{"p", "team-a", "demo", ".", false},
		{"p", "team-a", "demo", "a/b", false},
		{"p/..", "team-a", "demo", "b1", false},
		{"p/./q", "team-a", "demo", "b1", false},
		{"p//q", "team-a", "demo", "b1", false},
		{"/p", "team-a", "demo", "b1", false},
		{"p/", "team-a", "demo", "b1", false},
	} {
		err := CheckBackupPath(c.prefix, c.ns, c.cluster, c.backup)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrInvalidPath)) {
			t.Errorf("CheckBackupPath(%q, %q, %q, %q) = %v, want ok %v", c.prefix, c.ns, c.cluster, c.backup, err, c.ok)
		}
	}
}

func TestParseBackupPath(t *testing.T) {
	p, err := ParseBackupPath("redis/prod/team-a/demo/b1")
	if err != nil || p != (PathParts{Prefix: "redis/prod", Namespace: "team-a", Cluster: "demo", Backup: "b1"}) {
		t.Fatalf("%+v, %v", p, err)
	}
	if p, err := ParseBackupPath("team-a/demo/b1"); err != nil || p.Prefix != "" {
		t.Fatalf("without a prefix: %+v, %v", p, err)
	}
	for _, bad := range []string{"", "demo/b1", "/team-a/demo/b1", "p/../team-a/demo/b1", "p/team-a/demo/b1/",
		"p/team-b/../team-a/b1", "p//team-a/demo/b1", "p/team-a/demo/.."} {
		if _, err := ParseBackupPath(bad); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ParseBackupPath(%q) = %v, want ErrInvalidPath", bad, err)
		}
	}
}

// TestPathIdentity: a restore by path reads only a backup of its own
// namespace; the cluster may be another (a restore into a new cluster).
func TestPathIdentity(t *testing.T) {
	want, err := PathIdentity("team-a", "redis/team-a/demo/b1")
	if err != nil || want != (ManifestIdentity{Namespace: "team-a", Cluster: "demo", Backup: "b1"}) {
		t.Fatalf("%+v, %v", want, err)
	}
	_, err = PathIdentity("team-a", "redis/team-b/demo/b1")
	if !errors.Is(err, ErrInvalidPath) || !strings.Contains(err.Error(), `"team-b"`) || !strings.Contains(err.Error(), `"team-a"`) {
		t.Fatalf("another namespace's path: %v", err)
	}
	if _, err := PathIdentity("team-a", "redis/team-a/../team-b/demo/b1"); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("a path with ..: %v", err)
	}
}

// TestBackupIdentity: a restore by backupName reads the path the backup's
// spec gives, never a status.path edited to point elsewhere.
func TestBackupIdentity(t *testing.T) {
	b := &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "b1", UID: "uid-1"},
		Spec:   cachev1beta1.RedisClusterBackupSpec{ClusterName: "demo", ObjectStore: cachev1beta1.ObjectStoreSpec{Prefix: "p"}},
		Status: cachev1beta1.RedisClusterBackupStatus{Phase: cachev1beta1.BackupCompleted, Path: "p/team-a/demo/b1"}}
	path, want, err := BackupIdentity(b)
	if err != nil || path != "p/team-a/demo/b1" ||
		want != (ManifestIdentity{Namespace: "team-a", Cluster: "demo", Backup: "b1", BackupUID: "uid-1"}) {
		t.Fatalf("%q %+v %v", path, want, err)
	}
	b.Status.Path = "p/team-b/prod/nightly"
	if _, _, err := BackupIdentity(b); !errors.Is(err, ErrInvalidPath) || !strings.Contains(err.Error(), "p/team-a/demo/b1") {
		t.Fatalf("an edited status.path: %v", err)
	}
}
