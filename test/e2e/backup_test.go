//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/test/s3test"
)

// objectStore is the suite's one SeaweedFS (weed mini, bin/weed), started
// by the first backup scenario on the plane's gateway address: the
// operator (a host process) and the restore init containers (in the pods'
// network namespaces) both reach it there.
var objectStore struct {
	once sync.Once
	srv  *s3test.Server
	err  error
}

// suiteStore starts the object store once for the suite (it lives until
// the e2e binary exits; its data directory is the run's).
func suiteStore(t testing.TB) *s3test.Server {
	t.Helper()
	objectStore.once.Do(func() {
		// planeGateway and StartAt end a failure with t.Fatal, which leaves
		// the Once done: the error stays for every later caller instead of
		// a nil server.
		objectStore.err = errors.New("the suite's object store did not start (see the first scenario that used it)")
		objectStore.srv = s3test.StartAt(suiteTB{t}, planeGateway(t))
		objectStore.err = nil
	})
	if objectStore.err != nil {
		t.Fatal(objectStore.err)
	}
	return objectStore.srv
}

// suiteTB is t whose cleanups never run: the object store outlives the
// scenario that started it (the process group dies with the e2e binary,
// Pdeathsig), and its directory lives under the run's.
type suiteTB struct{ testing.TB }

func (suiteTB) Cleanup(func()) {}

func (s suiteTB) TempDir() string {
	dir, err := os.MkdirTemp(env.tmpDir, "weed-")
	if err != nil {
		s.Fatal(err)
	}
	return dir
}

// backupSecret creates the Secret with the store's access key pair in ns.
func backupSecret(t testing.TB, ns, name, secretKey string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		StringData: map[string]string{"accessKeyID": s3test.AccessKey, "secretAccessKey": secretKey}}
	if err := env.k8s.Create(context.Background(), s); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func storeSpec(srv *s3test.Server, bucket, secret string) cachev1beta1.ObjectStoreSpec {
	return cachev1beta1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: bucket, Prefix: "e2e", Region: "us-east-1",
		ForcePathStyle: true, CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: secret}}
}

func createBackup(t testing.TB, ns, name, cluster string, store cachev1beta1.ObjectStoreSpec) {
	t.Helper()
	b := &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cachev1beta1.RedisClusterBackupSpec{ClusterName: cluster, ObjectStore: store}}
	if err := env.k8s.Create(context.Background(), b); err != nil {
		t.Fatalf("creating RedisClusterBackup %s/%s: %v", ns, name, err)
	}
}

func getBackup(t testing.TB, ns, name string) *cachev1beta1.RedisClusterBackup {
	t.Helper()
	var b cachev1beta1.RedisClusterBackup
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
		t.Fatal(err)
	}
	return &b
}

func backupSummary(b *cachev1beta1.RedisClusterBackup) string {
	s := fmt.Sprintf("phase %s, attempts %d", b.Status.Phase, b.Status.Attempts)
	for _, c := range b.Status.Conditions {
		s += fmt.Sprintf("; %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
	}
	return s
}

// waitBackup polls the backup until cond holds.
func waitBackup(t testing.TB, ns, name string, timeout time.Duration, cond func(*cachev1beta1.RedisClusterBackup) bool) *cachev1beta1.RedisClusterBackup {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b := getBackup(t, ns, name)
		if cond(b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("RedisClusterBackup %s/%s: %s", ns, name, backupSummary(b))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func hasManifest(t *testing.T, srv *s3test.Server, bucket string, b *cachev1beta1.RedisClusterBackup) bool {
	t.Helper()
	store, err := backup.NewStore(&cachev1beta1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: bucket, ForcePathStyle: true},
		backup.Keys{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := backup.BackupPath(&b.Spec.ObjectStore, b.Namespace, b.Spec.ClusterName, b.Name)
	ok, err := store.Exists(context.Background(), backup.ManifestKey(path))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestBackup (label backup): backups of a 3×1 cluster to SeaweedFS's S3
// gateway, restores from them (also with the object store's keys in Vault),
// and the failures each with its condition. Side by side: each scenario has
// its own namespace and bucket; the one that kills the operator is
// TestBackupOperatorKilled's.
func TestBackup(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	t.Run("restore", func(t *testing.T) {
		scenario(t, "backup/restore")
		srv := suiteStore(t)
		srv.MakeBucket(t, "restore")
		c := newCluster(t, "backup", nil)
		backupSecret(t, c.ns, "s3", s3test.SecretKey)
		c.waitReady(5 * time.Minute)
		keys := loadKeys(t, c.clusterClient(), "bulk", 200000)
		w := startWriter(t, c.clusterClient(), "live", writerOptions{Interval: 2 * time.Millisecond, Max: 1000000})
		w.waitWrites(200, time.Minute)
		// Every write acknowledged now was acknowledged before the backup's start.
		w.mu.Lock()
		before := append([]int(nil), w.acked...)
		w.mu.Unlock()
		createBackup(t, c.ns, "b1", c.name, storeSpec(srv, "restore", "s3"))
		b := waitBackup(t, c.ns, "b1", 5*time.Minute, func(b *cachev1beta1.RedisClusterBackup) bool {
			return b.Status.Phase == cachev1beta1.BackupCompleted || b.Status.Phase == cachev1beta1.BackupFailed
		})
		during := w.result()
		if b.Status.Phase != cachev1beta1.BackupCompleted || len(b.Status.Shards) != 3 || !hasManifest(t, srv, "restore", b) {
			t.Fatalf("backup: %s", backupSummary(b))
		}
		for _, s := range b.Status.Shards {
			if s.Role != "replica" || s.Size == 0 || len(s.SHA256) != 64 || len(s.Slots) == 0 {
				t.Fatalf("shard %+v", s)
			}
		}
		took := b.Status.EndTime.Sub(b.Status.StartTime.Time)
		t.Logf("backup of %d bytes in %s (%.1f MB/s) under writes (%s)", b.Status.Size, took,
			float64(b.Status.Size)/1e6/max(took.Seconds(), 0.001), during)

		c.destroy()
		// The StatefulSets go by garbage collection, after the cluster: until
		// then they recreate pods, and the pods their claims.
		waitFor(t, "the deleted cluster's StatefulSets gone", 2*time.Minute, func() (bool, string) {
			n := len(c.statefulSets())
			return n == 0, fmt.Sprintf("%d StatefulSets left", n)
		})
		c.waitPodsGone(3 * time.Minute)
		// A claim goes once no pod uses it (its pvc-protection finalizer).
		waitFor(t, "the deleted cluster's claims gone", 2*time.Minute, func() (bool, string) {
			_ = env.k8s.DeleteAllOf(context.Background(), &corev1.PersistentVolumeClaim{}, client.InNamespace(c.ns),
				client.MatchingLabels{resources.LabelCluster: c.name})
			n := len(c.claims())
			return n == 0, fmt.Sprintf("%d claims left", n)
		})

		start := time.Now()
		restored := restoreCluster(t, c.ns, "restored", "64Mi", "b1")
		restored.waitReady(5 * time.Minute)
		t.Logf("restored and Ready in %s", time.Since(start).Round(time.Second))
		cl := restored.clusterClient()
		if lost, wrong := keys.check(t, cl, nil); len(lost)+len(wrong) > 0 {
			t.Fatalf("bulk keys: %d lost (first %s), %d wrong (first %s)", len(lost), first(lost), len(wrong), first(wrong))
		}
		if lost, wrong := w.readBack(cl, before); len(lost)+len(wrong) > 0 {
			t.Fatalf("%d writes acknowledged before the backup: %d lost (first %s), %d wrong (first %s)",
				len(before), len(lost), first(lost), len(wrong), first(wrong))
		}
		t.Logf("200000 bulk keys and %d writes acknowledged before the backup read back", len(before))
	})

	t.Run("object-store-errors", func(t *testing.T) {
		scenario(t, "backup/object-store-errors")
		srv := suiteStore(t)
		srv.MakeBucket(t, "errors")
		ns := "e2e-backup-errors"
		if err := ensureNamespace(context.Background(), ns); err != nil {
			t.Fatal(err)
		}
		backupSecret(t, ns, "wrong", "not-the-secret-key")
		backupSecret(t, ns, "right", s3test.SecretKey)
		createBackup(t, ns, "wrong-key", "none", storeSpec(srv, "errors", "wrong"))
		createBackup(t, ns, "no-bucket", "none", storeSpec(srv, "missing", "right"))
		createBackup(t, ns, "no-secret", "none", storeSpec(srv, "errors", "absent"))
		for name, reason := range map[string]string{
			"wrong-key": cachev1beta1.BackupAccessDeniedReason,
			"no-bucket": cachev1beta1.BackupNoSuchBucketReason,
			"no-secret": cachev1beta1.BackupCredentialsSecretReason,
		} {
			b := waitBackup(t, ns, name, 2*time.Minute, func(b *cachev1beta1.RedisClusterBackup) bool {
				c := meta.FindStatusCondition(b.Status.Conditions, cachev1beta1.BackupObjectStoreReadyCondition)
				return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason
			})
			if b.Status.Phase != cachev1beta1.BackupPending || hasManifest(t, srv, "errors", b) {
				t.Fatalf("%s: %s", name, backupSummary(b))
			}
			t.Logf("%s: %s", name, backupSummary(b))
		}
	})

	t.Run("restore-vault", func(t *testing.T) {
		scenario(t, "backup/restore-vault")
		srv := suiteStore(t)
		srv.MakeBucket(t, "vault")
		c := newCluster(t, "backup-vault", nil)
		vault, _, _ := startVaultForNamespace(t, c.ns, "secret/data/s3/*")
		if _, err := vault.KVv2("secret").Put(context.Background(), "s3/keys",
			map[string]any{"accessKeyID": s3test.AccessKey, "secretAccessKey": s3test.SecretKey}); err != nil {
			t.Fatalf("writing secret/s3/keys: %v", err)
		}
		store := storeSpec(srv, "vault", "")
		store.CredentialsSecretRef = nil
		store.CredentialsVault = &cachev1beta1.ObjectStoreVaultCredentials{Vault: cachev1beta1.VaultSource{
			Address: vault.Address(), CASecretRef: vaultCARef(), Mount: "secret", Path: "s3/keys",
			Role: vaultRole, AuthMount: "kubernetes", Audience: vaultAudience, ServiceAccountName: vaultLoginSA,
		}}
		c.waitReady(5 * time.Minute)
		keys := loadKeys(t, c.clusterClient(), "bulk", 20000)
		createBackup(t, c.ns, "b1", c.name, store)
		b := waitBackup(t, c.ns, "b1", 5*time.Minute, func(b *cachev1beta1.RedisClusterBackup) bool {
			return b.Status.Phase == cachev1beta1.BackupCompleted || b.Status.Phase == cachev1beta1.BackupFailed
		})
		if b.Status.Phase != cachev1beta1.BackupCompleted || !hasManifest(t, srv, "vault", b) {
			t.Fatalf("backup with the keys in Vault: %s", backupSummary(b))
		}

		// The restore reads the same keys from Vault; its pods get them in a
		// Secret of the operator's, gone once the cluster is formed.
		restored := restoreCluster(t, c.ns, "backup-vault-restored", "64Mi", "b1")
		restored.waitReady(5 * time.Minute)
		if lost, wrong := keys.check(t, restored.clusterClient(), nil); len(lost)+len(wrong) > 0 {
			t.Fatalf("bulk keys: %d lost (first %s), %d wrong (first %s)", len(lost), first(lost), len(wrong), first(wrong))
		}
		keysSecret := client.ObjectKey{Namespace: c.ns, Name: resources.RestoreKeysSecretName(restored.name)}
		waitFor(t, "the restore's keys Secret deleted", time.Minute, func() (bool, string) {
			err := env.k8s.Get(context.Background(), keysSecret, &corev1.Secret{})
			return apierrors.IsNotFound(err), fmt.Sprintf("Secret %s: %v", keysSecret.Name, err)
		})
		t.Logf("backup and restore with the object store's keys in Vault: 20000 keys read back")
	})
}

// TestBackupOperatorKilled (label backup): the operator SIGKILLed while a
// backup runs; the attempt cut short leaves no manifest, and the backup
// completes (or fails with no manifest) once the operator is back. One at a
// time: it kills the suite's operator.
func TestBackupOperatorKilled(t *testing.T) {
	tier(t, tierCI)
	t.Run("operator-killed", func(t *testing.T) {
		scenario(t, "backup/operator-killed")
		srv := suiteStore(t)
		srv.MakeBucket(t, "killed")
		c := newCluster(t, "backup-killed", nil)
		backupSecret(t, c.ns, "s3", s3test.SecretKey)
		c.waitReady(5 * time.Minute)
		loadKeys(t, c.clusterClient(), "bulk", 20000)
		createBackup(t, c.ns, "b1", c.name, storeSpec(srv, "killed", "s3"))
		// The replicas wait repl-diskless-sync-delay (5 s) before they fork:
		// the attempt is recorded as Running well before it can finish.
		b := waitBackup(t, c.ns, "b1", 2*time.Minute, func(b *cachev1beta1.RedisClusterBackup) bool {
			return b.Status.Phase == cachev1beta1.BackupRunning || b.Status.Phase == cachev1beta1.BackupCompleted ||
				b.Status.Phase == cachev1beta1.BackupFailed
		})
		killOperator(t)
		if b.Status.Phase != cachev1beta1.BackupRunning {
			t.Fatalf("the backup was not running when the operator was killed: %s", backupSummary(b))
		}
		time.Sleep(2 * time.Second)
		if b := getBackup(t, c.ns, "b1"); hasManifest(t, srv, "killed", b) {
			t.Fatalf("a manifest exists for the attempt cut short: %s", backupSummary(b))
		}
		startOperator(t)
		b = waitBackup(t, c.ns, "b1", 5*time.Minute, func(b *cachev1beta1.RedisClusterBackup) bool {
			return b.Status.Phase == cachev1beta1.BackupCompleted || b.Status.Phase == cachev1beta1.BackupFailed
		})
		switch b.Status.Phase {
		case cachev1beta1.BackupCompleted:
			if b.Status.Attempts < 2 || !hasManifest(t, srv, "killed", b) || len(b.Status.Shards) != 3 {
				t.Fatalf("completed after the kill: %s", backupSummary(b))
			}
		default:
			if hasManifest(t, srv, "killed", b) {
				t.Fatalf("a failed backup has a manifest: %s", backupSummary(b))
			}
		}
		t.Logf("after the kill: %s", backupSummary(b))
	})
}

// restoreCluster creates the RedisCluster ns/name of 3 shards × 1 replica
// with claims of size that starts from the RedisClusterBackup backup
// (spec.bootstrap.fromBackup), and tracks it (dumped on failure, deleted
// when t ends).
func restoreCluster(t testing.TB, ns, name, size, backup string) *cluster {
	t.Helper()
	return restoreClusterWith(t, ns, name, size, backup, nil)
}

// restoreClusterWith is restoreCluster with the RedisCluster changed by
// mutate before it is created (another image, shard count or placement).
func restoreClusterWith(t testing.TB, ns, name, size, backup string, mutate func(*cachev1beta1.RedisCluster)) *cluster {
	t.Helper()
	q := resource.MustParse(size)
	restored := &cluster{t: t, ns: ns, name: name}
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1, Image: "redis:7.0",
			Storage:   cachev1beta1.StorageSpec{Size: &q, DeleteClaimPolicy: cachev1beta1.DeleteClaimDelete},
			Bootstrap: &cachev1beta1.BootstrapSpec{FromBackup: &cachev1beta1.FromBackupSpec{BackupName: backup}}}}
	if mutate != nil {
		mutate(rc)
	}
	restored.track()
	if err := env.k8s.Create(context.Background(), rc); err != nil {
		t.Fatal(err)
	}
	return restored
}
