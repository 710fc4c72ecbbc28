package backup

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// ErrInvalidPath: a backup path, or one of the names it is built from, has
// a part that could reach outside <prefix>/<namespace>/<cluster>/<backup>
// (an empty part, "." or "..") or a namespace, cluster or backup name that
// Kubernetes would not accept as such. Retrying cannot help: the spec (or
// the status of an object written before the schema refused it) is wrong.
var ErrInvalidPath = errors.New("invalid backup path")

// BackupPath is the key prefix of a backup:
// <prefix>/<namespace>/<cluster>/<backup> (without the prefix when empty).
// The parts are joined as they are, with no "." or ".." resolution (which
// path.Join does): CheckBackupPath says whether they are safe to join.
func BackupPath(spec *cachev1beta1.ObjectStoreSpec, namespace, cluster, backup string) string {
	parts := []string{namespace, cluster, backup}
	if spec != nil && spec.Prefix != "" {
		parts = append([]string{spec.Prefix}, parts...)
	}
	return strings.Join(parts, "/")
}

// CheckBackupPath returns nil when BackupPath of these parts stays under
// <prefix>/<namespace>/<cluster>/: every '/'-separated part of prefix is
// neither empty, "." nor ".."; namespace and cluster are DNS-1123 labels
// (what Kubernetes allows for a namespace and the schema for
// spec.clusterName) and backup a DNS-1123 subdomain (what Kubernetes allows
// for an object's name: no '/', never "." or ".."). Errors wrap
// ErrInvalidPath and name the part.
func CheckBackupPath(prefix, namespace, cluster, backup string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	if err := checkLabel("namespace", namespace); err != nil {
		return err
	}
	if err := checkLabel("spec.clusterName", cluster); err != nil {
		return err
	}
	if msgs := validation.IsDNS1123Subdomain(backup); len(msgs) > 0 {
		return fmt.Errorf("%w: backup name %s is not a DNS-1123 subdomain", ErrInvalidPath, quoteShort(backup))
	}
	return nil
}

func checkPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	for i, part := range strings.Split(prefix, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("%w: objectStore.prefix %s: part %d is %q (every '/'-separated part must be non-empty and not . or ..)",
				ErrInvalidPath, quoteShort(prefix), i+1, part)
		}
	}
	return nil
}

func checkLabel(what, v string) error {
	if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
		return fmt.Errorf("%w: %s %s is not a DNS-1123 label (lowercase letters, digits and '-', at most 63)", ErrInvalidPath, what, quoteShort(v))
	}
	return nil
}

// PathParts are the parts of a backup path
// <prefix>/<namespace>/<cluster>/<backup>.
type PathParts struct {
	Prefix, Namespace, Cluster, Backup string
}

// ParseBackupPath splits p into its parts from the end (the prefix is what
// precedes the last three) and checks them as CheckBackupPath does. Errors
// wrap ErrInvalidPath.
func ParseBackupPath(p string) (PathParts, error) {
	parts := strings.Split(p, "/")
	if len(parts) < 3 {
		return PathParts{}, fmt.Errorf("%w: %s is not <prefix>/<namespace>/<cluster>/<backup>", ErrInvalidPath, quoteShort(p))
	}
	n := len(parts)
	out := PathParts{Prefix: strings.Join(parts[:n-3], "/"), Namespace: parts[n-3], Cluster: parts[n-2], Backup: parts[n-1]}
	if n > 3 && out.Prefix == "" {
		return PathParts{}, fmt.Errorf("%w: %s starts with '/'", ErrInvalidPath, quoteShort(p))
	}
	if err := CheckBackupPath(out.Prefix, out.Namespace, out.Cluster, out.Backup); err != nil {
		return PathParts{}, err
	}
	return out, nil
}

// ExpectedPath is the path the backup controller writes b to, checked:
// a status.path that differs from it was not written by the controller
// (an object edited, or stored before the path rules), and nothing is read
// from or deleted at it. Errors wrap ErrInvalidPath.
func ExpectedPath(b *cachev1beta1.RedisClusterBackup) (string, error) {
	if err := CheckBackupPath(b.Spec.ObjectStore.Prefix, b.Namespace, b.Spec.ClusterName, b.Name); err != nil {
		return "", err
	}
	return BackupPath(&b.Spec.ObjectStore, b.Namespace, b.Spec.ClusterName, b.Name), nil
}

// CheckRecordedPath returns nil when b's status.path is the path its spec
// and names give (ExpectedPath), or an error wrapping ErrInvalidPath that
// names both.
func CheckRecordedPath(b *cachev1beta1.RedisClusterBackup) error {
	want, err := ExpectedPath(b)
	if err != nil {
		return err
	}
	if b.Status.Path != want {
		return fmt.Errorf("%w: status.path %s of RedisClusterBackup %s is not %s, the path its spec gives", ErrInvalidPath,
			quoteShort(b.Status.Path), b.Name, want)
	}
	return nil
}

// quoteShort quotes s, cut to 80 bytes: it may come from an object or a
// manifest someone else wrote, and ends in a condition message.
func quoteShort(s string) string {
	const limit = 80
	if len(s) > limit {
		return fmt.Sprintf("%q...", strings.ToValidUTF8(s[:limit], ""))
	}
	return fmt.Sprintf("%q", s)
}

// PathIdentity checks a restore's spec.bootstrap.fromBackup.path for a
// RedisCluster of namespace and returns what the manifest found there must
// record: the path's namespace part, which must be namespace (a restore
// reads only backups of its own namespace, one made in another Kubernetes
// cluster included), its cluster and backup parts. Errors wrap
// ErrInvalidPath.
func PathIdentity(namespace, backupPath string) (ManifestIdentity, error) {
	parts, err := ParseBackupPath(backupPath)
	if err != nil {
		return ManifestIdentity{}, err
	}
	if parts.Namespace != namespace {
		return ManifestIdentity{}, fmt.Errorf("%w: the namespace part of %s is %s, not this RedisCluster's namespace %q: a restore reads only backups of its own namespace",
			ErrInvalidPath, quoteShort(backupPath), quoteShort(parts.Namespace), namespace)
	}
	return ManifestIdentity{Namespace: parts.Namespace, Cluster: parts.Cluster, Backup: parts.Backup}, nil
}

// BackupIdentity checks the status.path of a Completed RedisClusterBackup
// a restore names (spec.bootstrap.fromBackup.backupName) and returns it
// with what the manifest there must record: b's namespace, cluster, name
// and UID. Errors wrap ErrInvalidPath (CheckRecordedPath).
func BackupIdentity(b *cachev1beta1.RedisClusterBackup) (string, ManifestIdentity, error) {
	if err := CheckRecordedPath(b); err != nil {
		return "", ManifestIdentity{}, err
	}
	return b.Status.Path, ManifestIdentity{Namespace: b.Namespace, Cluster: b.Spec.ClusterName, Backup: b.Name, BackupUID: string(b.UID)}, nil
}
