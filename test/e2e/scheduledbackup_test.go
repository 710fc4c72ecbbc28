//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/backup"
	"github.com/redis-operator/redis-operator/test/s3test"
)

// TestScheduledBackup (label backup): a RedisClusterScheduledBackup of a
// 3×0 cluster every 20 s with keepLast 2 takes backups one after another,
// and retention keeps the last 2 Completed ones, the older ones' objects
// gone from SeaweedFS; a schedule with a wrong secret key says
// ObjectStoreReady False AccessDenied. Its own namespace; safe beside
// other scenarios (it stops no operator and touches no node).
func TestScheduledBackup(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go
	scenario(t, "backup/scheduled")
	srv := suiteStore(t)
	srv.MakeBucket(t, "scheduled")
	c := newCluster(t, "backup-scheduled", func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = 0 })
	backupSecret(t, c.ns, "s3", s3test.SecretKey)
	backupSecret(t, c.ns, "wrong", "not-the-secret-key")
	c.waitReady(5 * time.Minute)
	loadKeys(t, c.clusterClient(), "bulk", 2000)

	ctx := context.Background()
	create := func(name, secret string) {
		sb := &cachev1beta1.RedisClusterScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: name},
			Spec: cachev1beta1.RedisClusterScheduledBackupSpec{Schedule: "@every 20s",
				Retention: cachev1beta1.RetentionPolicy{KeepLast: 2},
				Template:  cachev1beta1.RedisClusterBackupSpec{ClusterName: c.name, ObjectStore: storeSpec(srv, "scheduled", secret)}}}
		if err := env.k8s.Create(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	create("every20s", "s3")
	create("wrong-key", "wrong")
	get := func(name string) *cachev1beta1.RedisClusterScheduledBackup {
		var sb cachev1beta1.RedisClusterScheduledBackup
		if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: c.ns, Name: name}, &sb); err != nil {
			t.Fatal(err)
		}
		return &sb
	}
	list := func(schedule string) []cachev1beta1.RedisClusterBackup {
		var l cachev1beta1.RedisClusterBackupList
		if err := env.k8s.List(ctx, &l, client.InNamespace(c.ns), client.MatchingLabels{cachev1beta1.ScheduledBackupLabel: schedule}); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}

	// Every Completed backup seen, with its path: the deleted ones' objects
	// must be gone.
	seen := map[string]*cachev1beta1.RedisClusterBackup{}
	waitFor(t, "4 scheduled backups Completed, the last 2 kept", 4*time.Minute, func() (bool, string) {
		var kept []string
		running := 0
		for _, b := range list("every20s") {
			switch b.Status.Phase {
			case cachev1beta1.BackupCompleted:
				seen[b.Name] = b.DeepCopy()
				kept = append(kept, b.Name)
			case cachev1beta1.BackupPending, cachev1beta1.BackupRunning, "":
				running++
			}
		}
		if running > 1 {
			t.Fatalf("%d backups of one schedule not finished at once", running)
		}
		return len(seen) >= 4 && len(kept) == 2, fmt.Sprintf("%d Completed seen, kept %v, %d running", len(seen), kept, running)
	})
	// Suspended, the schedule takes no more backups (retention still
	// runs): the kept set stops moving once the last one finished.
	// A merge patch of the one field: the controller writes the schedule's
	// status as backups finish, so an Update from a read could conflict.
	sb := get("every20s")
	orig := sb.DeepCopy()
	sb.Spec.Suspend = true
	if err := env.k8s.Patch(ctx, sb, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	var keptNames []string
	waitFor(t, "the suspended schedule's last backup finished and retention applied", 2*time.Minute, func() (bool, string) {
		keptNames = nil
		running := 0
		for _, b := range list("every20s") {
			switch b.Status.Phase {
			case cachev1beta1.BackupCompleted:
				seen[b.Name] = b.DeepCopy()
				keptNames = append(keptNames, b.Name)
			case cachev1beta1.BackupPending, cachev1beta1.BackupRunning, "":
				running++
			}
		}
		return running == 0 && len(keptNames) == 2, fmt.Sprintf("kept %v, %d running", keptNames, running)
	})
	sb = get("every20s")
	if !slices.Contains(keptNames, sb.Status.LastSuccessfulBackup) || sb.Status.LastScheduleTime == nil ||
		!meta.IsStatusConditionTrue(sb.Status.Conditions, cachev1beta1.ScheduledBackupLastBackupCompleteCondition) ||
		!meta.IsStatusConditionTrue(sb.Status.Conditions, cachev1beta1.ScheduledBackupRetentionAppliedCondition) {
		t.Fatalf("schedule status %+v (kept %v)", sb.Status, keptNames)
	}
	store, err := backup.NewStore(&cachev1beta1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: "scheduled", ForcePathStyle: true},
		backup.Keys{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gone := 0
	for name, b := range seen {
		want := slices.Contains(keptNames, name)
		keys := []string{backup.ManifestKey(b.Status.Path)}
		for _, s := range b.Status.Shards {
			keys = append(keys, s.ObjectKey)
		}
		for _, key := range keys {
			ok, err := store.Exists(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if ok != want {
				t.Fatalf("backup %s (kept %v): object %s exists %v", name, want, key, ok)
			}
		}
		if !want {
			gone++
		}
	}

	wrong := get("wrong-key")
	cond := meta.FindStatusCondition(wrong.Status.Conditions, cachev1beta1.ScheduledBackupObjectStoreReadyCondition)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != cachev1beta1.BackupAccessDeniedReason {
		t.Fatalf("wrong-key schedule: ObjectStoreReady %+v", cond)
	}
	if n := len(list("wrong-key")); n != 1 {
		t.Fatalf("wrong-key schedule: %d backups, want 1 (the next times skipped while it is Pending)", n)
	}
	fmt.Printf("e2e: backup/scheduled %d Completed backups seen, %d kept (%v), %d deleted with their objects gone; wrong key: %s %s\n",
		len(seen), len(keptNames), keptNames, gone, cond.Reason, cond.Message)
}
