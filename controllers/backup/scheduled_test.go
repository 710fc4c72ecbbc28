package backup

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/test/s3test"
)

// TestScheduledBackup runs the schedule's Reconcile against a real API
// server and SeaweedFS with an injected clock, playing the backup
// controller's part (each backup it creates is marked Completed with
// objects in the store): a backup per scheduled time, none while the
// previous one is Pending, a time past the starting deadline skipped,
// retention keeping the last 2 Completed backups and deleting the others'
// objects (and, while the store is down, keeping them with RetentionApplied
// False DeleteFailed), and the newest backup's ObjectStoreReady mirrored.
func TestScheduledBackup(t *testing.T) {
	k8s := startAPIServer(t)
	ctx := context.Background()
	srv := s3test.Start(t)
	srv.MakeBucket(t, "sched")
	const ns = "default"
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"},
		StringData: map[string]string{"accessKeyID": s3test.AccessKey, "secretAccessKey": s3test.SecretKey}}); err != nil {
		t.Fatal(err)
	}
	spec := cachev1beta1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: "sched", Prefix: "p", Region: "us-east-1",
		ForcePathStyle: true, CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: "s3",
			AccessKeyIDKey: "accessKeyID", SecretAccessKeyKey: "secretAccessKey"}}
	sb := &cachev1beta1.RedisClusterScheduledBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: cachev1beta1.RedisClusterScheduledBackupSpec{Schedule: "@every 1m",
			Retention: cachev1beta1.RetentionPolicy{KeepLast: 2},
			Template:  cachev1beta1.RedisClusterBackupSpec{ClusterName: "demo", ObjectStore: spec}}}
	if err := k8s.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFakeClock(sb.CreationTimestamp.Time)
	events := record.NewFakeRecorder(100)
	r := &ScheduledReconciler{Client: k8s, APIReader: k8s, Recorder: events, Clock: clk}
	s3, err := NewStore(&spec, Keys{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}, nil)
	if err != nil {
		t.Fatal(err)
	}

	pass := func() *cachev1beta1.RedisClusterScheduledBackup {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sb)}); err != nil {
			t.Fatal(err)
		}
		var got cachev1beta1.RedisClusterScheduledBackup
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sb), &got); err != nil {
			t.Fatal(err)
		}
		return &got
	}
	backups := func() []string {
		t.Helper()
		var list cachev1beta1.RedisClusterBackupList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, b := range list.Items {
			out = append(out, b.Name)
		}
		slices.Sort(out)
		return out
	}
	drain := func(prefix string) int {
		n := 0
		for len(events.Events) > 0 {
			if strings.HasPrefix(<-events.Events, prefix) {
				n++
			}
		}
		return n
	}
	// complete plays the backup controller: the backup Completed, its
	// manifest and one RDB in the store.
	complete := func(name string) string {
		t.Helper()
		var b cachev1beta1.RedisClusterBackup
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &b); err != nil {
			t.Fatal(err)
		}
		path := BackupPath(&b.Spec.ObjectStore, ns, "demo", name)
		for _, key := range []string{ShardKey(path, 0), ManifestKey(path)} {
			if err := s3.Put(ctx, key, []byte("x"), "application/octet-stream"); err != nil {
				t.Fatal(err)
			}
		}
		b.Status = cachev1beta1.RedisClusterBackupStatus{Phase: cachev1beta1.BackupCompleted, Path: path,
			StartTime: &metav1.Time{Time: clk.Now()}, EndTime: &metav1.Time{Time: clk.Now()}}
		if err := k8s.Status().Update(ctx, &b); err != nil {
			t.Fatal(err)
		}
		return path
	}

	got := pass()
	first := sb.CreationTimestamp.Add(time.Minute)
	if len(backups()) != 0 || got.Status.NextScheduleTime == nil || !got.Status.NextScheduleTime.Equal(&metav1.Time{Time: first}) {
		t.Fatalf("before the first time: backups %v, status %+v", backups(), got.Status)
	}

	var paths []string
	for i := range 4 {
		clk.Step(time.Minute)
		got = pass()
		want := BackupName("nightly", first.Add(time.Duration(i)*time.Minute))
		if got.Status.Active != want || !slices.Contains(backups(), want) {
			t.Fatalf("time %d: active %q, backups %v; want %s", i, got.Status.Active, backups(), want)
		}
		if i == 0 {
			// The next time comes while the backup is still Pending: skipped.
			clk.Step(time.Minute)
			got = pass()
			if n := drain("Warning Skipped"); n != 1 || len(backups()) != 1 || got.Status.Active != want {
				t.Fatalf("skip: %d Skipped events, backups %v, active %q", n, backups(), got.Status.Active)
			}
			first = first.Add(time.Minute)
		}
		paths = append(paths, complete(want))
		got = pass()
		if got.Status.Active != "" || got.Status.LastSuccessfulBackup != want ||
			!meta.IsStatusConditionTrue(got.Status.Conditions, cachev1beta1.ScheduledBackupLastBackupCompleteCondition) ||
			!meta.IsStatusConditionTrue(got.Status.Conditions, cachev1beta1.ScheduledBackupRetentionAppliedCondition) {
			t.Fatalf("after completing %s: %+v", want, got.Status)
		}
	}
	// Four Completed, keepLast 2: the two oldest are gone, objects first.
	if n := len(backups()); n != 2 {
		t.Fatalf("backups %v, want the last 2", backups())
	}
	for i, p := range paths {
		ok, err := s3.Exists(ctx, ManifestKey(p))
		if err != nil {
			t.Fatal(err)
		}
		rdb, err := s3.Exists(ctx, ShardKey(p, 0))
		if err != nil {
			t.Fatal(err)
		}
		if (i < 2) == (ok || rdb) {
			t.Fatalf("backup %d (%s): manifest %v, RDB %v after retention", i, p, ok, rdb)
		}
	}
	if n := drain("Normal Deleted"); n != 2 {
		t.Fatalf("%d Deleted events, want 2", n)
	}

	// Down for 5.5 minutes with a 10 s starting deadline: the most recent
	// time (30 s ago) is skipped, the others missed without a backup.
	got.Spec.StartingDeadlineSeconds = ptr.To[int64](10)
	if err := k8s.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	before := backups()
	clk.Step(5*time.Minute + 30*time.Second)
	got = pass()
	if n := drain("Warning MissedSchedule"); n != 1 || !slices.Equal(backups(), before) {
		t.Fatalf("past the deadline: %d MissedSchedule events, backups %v (before %v)", n, backups(), before)
	}
	clk.Step(30 * time.Second)
	if got = pass(); got.Status.Active == "" {
		t.Fatalf("the time after the missed one: %+v", got.Status)
	}

	// The newest backup cannot reach the store: the schedule says so.
	var b cachev1beta1.RedisClusterBackup
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: got.Status.Active}, &b); err != nil {
		t.Fatal(err)
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: cachev1beta1.BackupObjectStoreReadyCondition,
		Status: metav1.ConditionFalse, Reason: cachev1beta1.BackupAccessDeniedReason, Message: "bucket sched: access denied"})
	b.Status.Phase = cachev1beta1.BackupPending
	if err := k8s.Status().Update(ctx, &b); err != nil {
		t.Fatal(err)
	}
	got = pass()
	c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ScheduledBackupObjectStoreReadyCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != cachev1beta1.BackupAccessDeniedReason || !strings.Contains(c.Message, b.Name) {
		t.Fatalf("ObjectStoreReady: %+v", c)
	}

	// Retention while the store is down: the expired backup (three
	// Completed, keepLast 2) is kept, RetentionApplied is False
	// DeleteFailed with a RetentionFailed event; once the store is back
	// the next pass deletes it.
	drain("")
	complete(b.Name)
	before = backups()
	srv.Stop()
	got = pass()
	c = meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ScheduledBackupRetentionAppliedCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != cachev1beta1.ScheduledBackupDeleteFailedReason ||
		!slices.Equal(backups(), before) || drain("Warning RetentionFailed") != 1 {
		t.Fatalf("retention with the store down: RetentionApplied %+v, backups %v (before %v)", c, backups(), before)
	}
	srv.Restart(t)
	got = pass()
	if !meta.IsStatusConditionTrue(got.Status.Conditions, cachev1beta1.ScheduledBackupRetentionAppliedCondition) ||
		len(backups()) != 2 || drain("Normal Deleted") != 1 {
		t.Fatalf("retention once the store is back: %+v, backups %v", got.Status.Conditions, backups())
	}

	// A schedule the pattern lets through but cron refuses.
	got.Spec.Schedule = "61 * * * *"
	if err := k8s.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = pass()
	c = meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ScheduledBackupScheduleValidCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != cachev1beta1.ScheduledBackupInvalidScheduleReason || got.Status.NextScheduleTime != nil {
		t.Fatalf("ScheduleValid: %+v, next %v", c, got.Status.NextScheduleTime)
	}
}
