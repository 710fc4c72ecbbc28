package backup

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// retentionFixture is a schedule "nightly" of team-a (keepLast 2) with
// backups in a fake API client and their objects in a fake store.
type retentionFixture struct {
	k8s     client.Client
	store   *fakeS3
	secrets *secretReads
	events  *record.FakeRecorder
	r       *ScheduledReconciler
	sb      *cachev1beta1.RedisClusterScheduledBackup
}

func newRetentionFixture(t *testing.T) *retentionFixture {
	t.Helper()
	f := &retentionFixture{store: startFakeS3(t, "bkt")}
	start := time.Unix(1700000000, 0)
	f.sb = &cachev1beta1.RedisClusterScheduledBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nightly", UID: "schedule-uid", CreationTimestamp: metav1.NewTime(start)},
		Spec: cachev1beta1.RedisClusterScheduledBackupSpec{Schedule: "@every 24h", Suspend: true,
			Retention: cachev1beta1.RetentionPolicy{KeepLast: 2},
			Template:  cachev1beta1.RedisClusterBackupSpec{ClusterName: "demo", ObjectStore: storeSpec(f.store.endpoint())}}}
	f.k8s = fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(f.sb, s3Secret("team-a")).
		WithStatusSubresource(&cachev1beta1.RedisClusterBackup{}, &cachev1beta1.RedisClusterScheduledBackup{}).Build()
	f.secrets = &secretReads{Reader: f.k8s}
	f.events = record.NewFakeRecorder(100)
	f.r = &ScheduledReconciler{Client: f.k8s, APIReader: f.secrets, Recorder: f.events, Clock: testclock.NewFakeClock(start.Add(30 * 24 * time.Hour))}
	return f
}

// add creates a Completed backup of day i: owned by the schedule or not,
// with its status.path (the path its spec gives when path is empty), and
// objects at that path in the store.
func (f *retentionFixture) add(t *testing.T, name string, day int, owned bool, path string) string {
	t.Helper()
	at := metav1.NewTime(f.sb.CreationTimestamp.Add(time.Duration(day) * 24 * time.Hour))
	b := &cachev1beta1.RedisClusterBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, CreationTimestamp: at,
			Labels: map[string]string{cachev1beta1.ScheduledBackupLabel: f.sb.Name}},
		Spec: *f.sb.Spec.Template.DeepCopy()}
	if owned {
		b.OwnerReferences = []metav1.OwnerReference{{APIVersion: cachev1beta1.GroupVersion.String(), Kind: "RedisClusterScheduledBackup",
			Name: f.sb.Name, UID: f.sb.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	if path == "" {
		path = BackupPath(&b.Spec.ObjectStore, b.Namespace, b.Spec.ClusterName, b.Name)
	}
	if err := f.k8s.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	b.Status = cachev1beta1.RedisClusterBackupStatus{Phase: cachev1beta1.BackupCompleted, Path: path, StartTime: &at, EndTime: &at}
	if err := f.k8s.Status().Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{ShardKey(path, 0), ManifestKey(path)} {
		f.store.put(key, []byte("x"))
	}
	return path
}

func (f *retentionFixture) pass(t *testing.T) *cachev1beta1.RedisClusterScheduledBackup {
	t.Helper()
	if _, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.sb)}); err != nil {
		t.Fatal(err)
	}
	var got cachev1beta1.RedisClusterScheduledBackup
	if err := f.k8s.Get(context.Background(), client.ObjectKeyFromObject(f.sb), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func (f *retentionFixture) backups(t *testing.T) []string {
	t.Helper()
	var list cachev1beta1.RedisClusterBackupList
	if err := f.k8s.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range list.Items {
		out = append(out, b.Name)
	}
	slices.Sort(out)
	return out
}

// TestRetentionDeletesOnlyItsOwn: of five Completed backups with the
// schedule's label (keepLast 2), retention deletes only the one the
// schedule owns (controller reference with its UID) whose status.path is
// the path its spec gives, with its objects. A backup with the label but
// no owner reference, and an owned one whose status.path points at another
// namespace's backup, are kept with everything at their paths;
// RetentionApplied says why.
func TestRetentionDeletesOnlyItsOwn(t *testing.T) {
	f := newRetentionFixture(t)
	expired := f.add(t, "nightly-1", 1, true, "")
	// The victim: team-b's backup, in the same bucket.
	victim := "p/team-b/demo/prod-1"
	pointing := f.add(t, "nightly-2", 2, true, victim)
	foreign := f.add(t, "nightly-3", 3, false, "")
	f.add(t, "nightly-4", 4, true, "")
	f.add(t, "nightly-5", 5, true, "")

	got := f.pass(t)
	if want := []string{"nightly-2", "nightly-3", "nightly-4", "nightly-5"}; !slices.Equal(f.backups(t), want) {
		t.Fatalf("backups %v, want %v", f.backups(t), want)
	}
	if f.store.has(ManifestKey(expired)) || f.store.has(ShardKey(expired, 0)) {
		t.Errorf("the expired backup's objects are still at %s", expired)
	}
	for _, p := range []string{pointing, foreign} {
		if !f.store.has(ManifestKey(p)) || !f.store.has(ShardKey(p, 0)) {
			t.Errorf("objects at %s were deleted", p)
		}
	}
	c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ScheduledBackupRetentionAppliedCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != cachev1beta1.ScheduledBackupDeleteFailedReason ||
		!strings.Contains(c.Message, "nightly-2") || !strings.Contains(c.Message, victim) || strings.Contains(c.Message, "nightly-3") {
		t.Fatalf("RetentionApplied: %+v", c)
	}
}

// TestRetentionRefusesEndpoint: an expired backup whose endpoint the
// operator's policy refuses is kept: no Secret read, no request sent.
func TestRetentionRefusesEndpoint(t *testing.T) {
	f := newRetentionFixture(t)
	f.r.Endpoints = EndpointPolicy{Allowlist: []string{"https://s3.eu-west-1.amazonaws.com"}}
	for i := range 3 {
		f.add(t, BackupName("nightly", f.sb.CreationTimestamp.Add(time.Duration(i)*time.Hour)), i+1, true, "")
	}
	before := f.store.count()
	got := f.pass(t)
	if n := len(f.backups(t)); n != 3 {
		t.Fatalf("backups %v", f.backups(t))
	}
	if n := f.store.count() - before; n != 0 {
		t.Errorf("%d requests sent to the store", n)
	}
	if n := f.secrets.count(); n != 0 {
		t.Errorf("%d Secrets read", n)
	}
	c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.ScheduledBackupRetentionAppliedCondition)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "--"+EndpointAllowlistFlag) {
		t.Fatalf("RetentionApplied: %+v", c)
	}
}
