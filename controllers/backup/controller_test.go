package backup

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/test/redistest"
	"github.com/redis-operator/redis-operator/test/s3test"
)

// startAPIServer starts envtest (bin/ kube-apiserver and etcd) with the
// CRDs and returns a direct client.
func startAPIServer(t *testing.T) client.Client {
	t.Helper()
	c, _ := startAPIServerConfig(t)
	return c
}

// startAPIServerConfig is startAPIServer with the rest config too.
func startAPIServerConfig(t *testing.T) (client.Client, *rest.Config) {
	t.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "kustomize", "base", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: filepath.Join("..", "..", "bin"),
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest (run `make tools` first): %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cachev1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// TestReconcileBackup runs the controller's Reconcile against a real API
// server, real redis-server nodes (three masters without replicas, the
// pods' IPs and ports pointing at them) and SeaweedFS: a backup completes
// with a Warning per shard read from its master and a manifest; a wrong
// secret key leaves it Pending with ObjectStoreReady False AccessDenied; an
// attempt recorded as Running (the operator died in it) starts again and
// completes as attempt 2; an attempt the object store dies in fails
// without a manifest and the next completes once the store is back.
func TestReconcileBackup(t *testing.T) {
	k8s := startAPIServer(t)
	ctx := context.Background()
	srv := s3test.Start(t)
	srv.MakeBucket(t, "backups")

	nodes := redistest.Start(t, 3, redistest.Options{Password: "pw", OwnAddress: true,
		Extra: []string{"cluster-require-full-coverage no"}})
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	const ns = "default"
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo"},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, Image: "redis:7.0"}}
	if err := k8s.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	for i, n := range nodes {
		n.Do("CLUSTER", "ADDSLOTSRANGE", fmt.Sprint(ranges[i][0]), fmt.Sprint(ranges[i][1]))
		c := redis.NewClient(&redis.Options{Addr: n.Addr(), Password: "pw", Protocol: 2, DisableIdentity: true})
		waitClusterOK(t, c)
		_ = c.Close()
		name := fmt.Sprintf("demo-shard-%d", i)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-0"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "redis", Image: "redis:7.0",
				Ports: []corev1.ContainerPort{{Name: "redis", ContainerPort: int32(n.Port())}}}}}}
		if err := k8s.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: n.IP(),
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
		if err := k8s.Status().Update(ctx, pod); err != nil {
			t.Fatal(err)
		}
		rc.Status.Shards = append(rc.Status.Shards, cachev1beta1.ShardStatus{Name: name, MasterPod: pod.Name,
			Slots: []string{fmt.Sprintf("%d-%d", ranges[i][0], ranges[i][1])}})
	}
	meta.SetStatusCondition(&rc.Status.Conditions, metav1.Condition{Type: cachev1beta1.RedisClusterSlotsAssignedCondition,
		Status: metav1.ConditionTrue, Reason: "Ready", Message: "all slots"})
	if err := k8s.Status().Update(ctx, rc); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-auth"}, StringData: map[string]string{"password": "pw"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"}, StringData: map[string]string{"accessKeyID": s3test.AccessKey, "secretAccessKey": s3test.SecretKey}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3-wrong"}, StringData: map[string]string{"accessKeyID": s3test.AccessKey, "secretAccessKey": "wrong"}},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	events := record.NewFakeRecorder(100)
	r := &Reconciler{Client: k8s, APIReader: k8s, Recorder: events, Clock: clock.RealClock{}, MaxAttempts: DefaultMaxAttempts,
		AttemptTimeout: time.Minute, IdleTimeout: 20 * time.Second}
	store := func(secret string) cachev1beta1.ObjectStoreSpec {
		return cachev1beta1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: "backups", Prefix: "p", Region: "us-east-1",
			ForcePathStyle: true, CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: secret,
				AccessKeyIDKey: "accessKeyID", SecretAccessKeyKey: "secretAccessKey"}}
	}
	run := func(name string, spec cachev1beta1.ObjectStoreSpec, status *cachev1beta1.RedisClusterBackupStatus) *cachev1beta1.RedisClusterBackup {
		t.Helper()
		b := &cachev1beta1.RedisClusterBackup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: cachev1beta1.RedisClusterBackupSpec{ClusterName: "demo", ObjectStore: spec}}
		if err := k8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		if status != nil {
			b.Status = *status
			if err := k8s.Status().Update(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	s3, err := NewStore(&cachev1beta1.ObjectStoreSpec{Endpoint: srv.Endpoint, Bucket: "backups", ForcePathStyle: true},
		Keys{AccessKeyID: s3test.AccessKey, SecretAccessKey: s3test.SecretKey}, nil)
	if err != nil {
		t.Fatal(err)
	}

	b := run("b1", store("s3"), nil)
	if b.Status.Phase != cachev1beta1.BackupCompleted || len(b.Status.Shards) != 3 || b.Status.Attempts != 1 ||
		b.Status.Path != "p/default/demo/b1" || b.Status.StartTime == nil || b.Status.EndTime == nil {
		t.Fatalf("b1: %+v", b.Status)
	}
	for i, s := range b.Status.Shards {
		if s.Role != "master" || s.Pod != fmt.Sprintf("demo-shard-%d-0", i) || s.Size == 0 || s.NodeID != nodes[i].Do("CLUSTER", "MYID") {
			t.Fatalf("b1 shard %d: %+v", i, s)
		}
	}
	for i, s := range b.Status.Shards {
		if s.ObjectKey != ShardKey("p/default/demo/b1", i) {
			t.Fatalf("shard %d object key %q", i, s.ObjectKey)
		}
	}
	if m, err := ReadManifest(ctx, s3, b.Status.Path); err != nil || len(m.Shards) != 3 || m.RedisVersion != b.Status.RedisVersion {
		t.Fatalf("b1 manifest at %s: %+v, %v", b.Status.Path, m, err)
	}
	var warnings int
	for len(events.Events) > 0 {
		if e := <-events.Events; strings.HasPrefix(e, "Warning MasterSource") {
			warnings++
		}
	}
	if warnings != 3 {
		t.Fatalf("%d MasterSource warnings, want 3 (no shard has a replica)", warnings)
	}

	b = run("wrong-key", store("s3-wrong"), nil)
	c := meta.FindStatusCondition(b.Status.Conditions, cachev1beta1.BackupObjectStoreReadyCondition)
	if b.Status.Phase != cachev1beta1.BackupPending || c == nil || c.Status != metav1.ConditionFalse || c.Reason != cachev1beta1.BackupAccessDeniedReason {
		t.Fatalf("wrong-key: %+v", b.Status)
	}

	// An attempt the operator died in: Running, attempt 1, no manifest.
	b = run("interrupted", store("s3"), &cachev1beta1.RedisClusterBackupStatus{Phase: cachev1beta1.BackupRunning, Attempts: 1})
	if b.Status.Phase != cachev1beta1.BackupCompleted || b.Status.Attempts != 2 || b.Status.Path != "p/default/demo/interrupted" {
		t.Fatalf("interrupted: %+v", b.Status)
	}
	interrupted := false
	for len(events.Events) > 0 {
		if e := <-events.Events; strings.HasPrefix(e, "Warning AttemptInterrupted") {
			interrupted = true
		}
	}
	if !interrupted {
		t.Fatal("no AttemptInterrupted event")
	}

	// The object store dies in the middle of an attempt: frozen as the
	// attempt starts streaming (the Started event), then SIGKILLed. The
	// attempt fails and the backup waits for the next (Pending, no
	// manifest); while the store is down ObjectStoreReady is False
	// Unreachable; once it is back the next attempt completes.
	var killed sync.Once
	r.Recorder = hookRecorder{EventRecorder: events, hook: func(reason string) {
		if reason == "Started" {
			killed.Do(func() {
				srv.Freeze()
				time.AfterFunc(2*time.Second, srv.Stop)
			})
		}
	}}
	b = run("store-killed", store("s3"), nil)
	c = meta.FindStatusCondition(b.Status.Conditions, cachev1beta1.BackupCompleteCondition)
	if b.Status.Phase != cachev1beta1.BackupPending || b.Status.Attempts != 1 || c == nil ||
		c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "Attempt 1 failed") {
		t.Fatalf("store-killed after the kill: %+v", b.Status)
	}
	again := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			t.Fatal(err)
		}
	}
	again()
	c = meta.FindStatusCondition(b.Status.Conditions, cachev1beta1.BackupObjectStoreReadyCondition)
	if b.Status.Phase != cachev1beta1.BackupPending || b.Status.Attempts != 1 || c == nil ||
		c.Status != metav1.ConditionFalse || c.Reason != cachev1beta1.BackupObjectStoreUnreachableReason {
		t.Fatalf("store-killed while the store is down: %+v", b.Status)
	}
	srv.Restart(t)
	if ok, err := s3.Exists(ctx, ManifestKey(b.Status.Path)); err != nil || ok {
		t.Fatalf("a manifest for the attempt the store died in (%v, %v)", ok, err)
	}
	again()
	if b.Status.Phase != cachev1beta1.BackupCompleted || b.Status.Attempts != 2 || len(b.Status.Shards) != 3 {
		t.Fatalf("store-killed once the store is back: %+v", b.Status)
	}
	if m, err := ReadManifest(ctx, s3, b.Status.Path); err != nil || len(m.Shards) != 3 {
		t.Fatalf("store-killed manifest: %+v, %v", m, err)
	}
	var failed int
	for len(events.Events) > 0 {
		switch e := <-events.Events; {
		case strings.HasPrefix(e, "Warning AttemptFailed"):
			failed++
		case strings.HasPrefix(e, "Warning AttemptInterrupted"):
			t.Errorf("an attempt that failed was reported as interrupted: %s", e)
		}
	}
	if failed != 1 {
		t.Fatalf("%d AttemptFailed events, want 1", failed)
	}
}

// hookRecorder passes every event on and calls hook with its reason
// first: a test acts at the moment the controller reports a step.
type hookRecorder struct {
	record.EventRecorder
	hook func(reason string)
}

func (h hookRecorder) Event(o runtime.Object, typ, reason, msg string) {
	h.hook(reason)
	h.EventRecorder.Event(o, typ, reason, msg)
}

func (h hookRecorder) Eventf(o runtime.Object, typ, reason, format string, args ...any) {
	h.hook(reason)
	h.EventRecorder.Eventf(o, typ, reason, format, args...)
}
