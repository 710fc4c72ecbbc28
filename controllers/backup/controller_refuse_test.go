package backup

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	testclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// backupHarness runs the backup Reconciler against a fake API client (the
// objects given, Secret reads counted) and records its events and log.
type backupHarness struct {
	t       *testing.T
	k8s     client.Client
	secrets *secretReads
	events  *record.FakeRecorder
	r       *Reconciler

	mu  sync.Mutex
	log []string
}

func newBackupHarness(t *testing.T, objs ...client.Object) *backupHarness {
	t.Helper()
	k8s := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&cachev1beta1.RedisClusterBackup{}, &cachev1beta1.RedisClusterScheduledBackup{}).Build()
	h := &backupHarness{t: t, k8s: k8s, secrets: &secretReads{Reader: k8s}, events: record.NewFakeRecorder(100)}
	h.r = &Reconciler{Client: k8s, APIReader: h.secrets, Recorder: h.events, Clock: testclock.NewFakeClock(time.Unix(1700000000, 0)),
		MaxAttempts: DefaultMaxAttempts, AttemptTimeout: time.Minute, IdleTimeout: time.Second}
	return h
}

// logger records every log line of a pass.
func (h *backupHarness) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.log = append(h.log, prefix+" "+args)
	}, funcr.Options{Verbosity: 10})
}

// reconcile runs one pass of b and returns it as stored after.
func (h *backupHarness) reconcile(b *cachev1beta1.RedisClusterBackup) *cachev1beta1.RedisClusterBackup {
	h.t.Helper()
	ctx := logr.NewContext(context.Background(), h.logger())
	if _, err := h.r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
		h.t.Fatal(err)
	}
	var got cachev1beta1.RedisClusterBackup
	if err := h.k8s.Get(ctx, client.ObjectKeyFromObject(b), &got); err != nil {
		h.t.Fatal(err)
	}
	return &got
}

// everything is every text the passes produced: status, events, log.
func (h *backupHarness) everything(b *cachev1beta1.RedisClusterBackup) string {
	var parts []string
	for _, c := range b.Status.Conditions {
		parts = append(parts, c.Reason+": "+c.Message)
	}
	for len(h.events.Events) > 0 {
		parts = append(parts, <-h.events.Events)
	}
	h.mu.Lock()
	parts = append(parts, h.log...)
	h.mu.Unlock()
	return strings.Join(parts, "\n")
}

func s3Secret(ns string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"},
		Data: map[string][]byte{"accessKeyID": []byte("id"), "secretAccessKey": []byte("secret")}}
}

func newBackup(ns, name, uid, cluster string, store cachev1beta1.ObjectStoreSpec) *cachev1beta1.RedisClusterBackup {
	return &cachev1beta1.RedisClusterBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Spec:       cachev1beta1.RedisClusterBackupSpec{ClusterName: cluster, ObjectStore: store}}
}

func storeSpec(endpoint string) cachev1beta1.ObjectStoreSpec {
	return cachev1beta1.ObjectStoreSpec{Endpoint: endpoint, Bucket: "bkt", Prefix: "p", Region: "us-east-1", ForcePathStyle: true,
		CredentialsSecretRef: &cachev1beta1.ObjectStoreCredentials{Name: "s3", AccessKeyIDKey: "accessKeyID", SecretAccessKeyKey: "secretAccessKey"}}
}

func condition(b *cachev1beta1.RedisClusterBackup, t string) *metav1.Condition {
	return meta.FindStatusCondition(b.Status.Conditions, t)
}

// TestReconcileRefusesEscapingPath: a backup whose path parts would leave
// <prefix>/<namespace>/<cluster>/ (an object stored before the schema's
// pattern) fails with InvalidPath: no Secret read, no request sent, no
// path recorded. path.Join made "team-a" + "../team-b/demo" team-b's path.
func TestReconcileRefusesEscapingPath(t *testing.T) {
	f := startFakeS3(t, "bkt")
	escapes := map[string]*cachev1beta1.RedisClusterBackup{
		"cluster": newBackup("team-a", "b1", "uid-1", "../team-b/demo", storeSpec(f.endpoint())),
		"prefix": func() *cachev1beta1.RedisClusterBackup {
			s := storeSpec(f.endpoint())
			s.Prefix = "p/../../q"
			return newBackup("team-a", "b2", "uid-2", "demo", s)
		}(),
	}
	var objs []client.Object
	for _, b := range escapes {
		objs = append(objs, b)
	}
	h := newBackupHarness(t, append(objs, s3Secret("team-a"))...)
	for name, b := range escapes {
		got := h.reconcile(b)
		c := condition(got, cachev1beta1.BackupCompleteCondition)
		if got.Status.Phase != cachev1beta1.BackupFailed || c == nil || c.Reason != cachev1beta1.BackupInvalidPathReason ||
			!strings.Contains(c.Message, "invalid backup path") || got.Status.Path != "" {
			t.Errorf("%s: %+v", name, got.Status)
		}
	}
	if n := f.count(); n != 0 {
		t.Errorf("%d requests sent to the store", n)
	}
	if n := h.secrets.count(); n != 0 {
		t.Errorf("%d Secrets read", n)
	}
}

// TestReconcileRefusesForeignManifest: a manifest at a backup's path
// counts as that backup's only when it records its namespace, cluster,
// name and (when recorded) UID. One of a re-created backup of the same
// name (another UID) or of another namespace fails the backup with
// ManifestMismatch naming both values and nothing else of the manifest;
// one written before UIDs were recorded, with the right names, completes.
func TestReconcileRefusesForeignManifest(t *testing.T) {
	f := startFakeS3(t, "bkt")
	manifest := func(ns, cluster, backup, uid string) []byte {
		b, err := json.Marshal(&Manifest{Format: ManifestFormat, Namespace: ns, Cluster: cluster, Backup: backup, BackupUID: uid,
			RedisVersion: "7.0.99-foreign", Shards: []ManifestShard{{Name: "demo-shard-0", NodeID: "foreign-node-id",
				ObjectKey: fmt.Sprintf("p/team-a/demo/%s/shard-0.rdb", backup), Size: 1, SHA256: strings.Repeat("a", 64)}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	f.put("p/team-a/demo/recreated/manifest.json", manifest("team-a", "demo", "recreated", "uid-old"))
	f.put("p/team-a/demo/claimed/manifest.json", manifest("team-b", "demo", "claimed", ""))
	f.put("p/team-a/demo/legacy/manifest.json", manifest("team-a", "demo", "legacy", ""))
	f.put("p/team-a/demo/own/manifest.json", manifest("team-a", "demo", "own", "uid-own"))
	recreated := newBackup("team-a", "recreated", "uid-new", "demo", storeSpec(f.endpoint()))
	claimed := newBackup("team-a", "claimed", "uid-c", "demo", storeSpec(f.endpoint()))
	legacy := newBackup("team-a", "legacy", "uid-l", "demo", storeSpec(f.endpoint()))
	own := newBackup("team-a", "own", "uid-own", "demo", storeSpec(f.endpoint()))
	h := newBackupHarness(t, recreated, claimed, legacy, own, s3Secret("team-a"))

	for _, c := range []struct {
		b    *cachev1beta1.RedisClusterBackup
		want []string
	}{
		{recreated, []string{`backup UID "uid-old" (expected "uid-new")`}},
		{claimed, []string{`namespace "team-b" (expected "team-a")`}},
	} {
		got := h.reconcile(c.b)
		cond := condition(got, cachev1beta1.BackupCompleteCondition)
		if got.Status.Phase != cachev1beta1.BackupFailed || cond == nil || cond.Reason != cachev1beta1.BackupManifestMismatchReason {
			t.Fatalf("%s: %+v", c.b.Name, got.Status)
		}
		for _, w := range c.want {
			if !strings.Contains(cond.Message, w) {
				t.Errorf("%s: %q lacks %q", c.b.Name, cond.Message, w)
			}
		}
		all := h.everything(got)
		for _, foreign := range []string{"7.0.99-foreign", "foreign-node-id"} {
			if strings.Contains(all, foreign) || got.Status.RedisVersion != "" || len(got.Status.Shards) != 0 {
				t.Errorf("%s: the foreign manifest's data reached the status, events or log:\n%s\n%+v", c.b.Name, all, got.Status)
			}
		}
	}
	for _, b := range []*cachev1beta1.RedisClusterBackup{legacy, own} {
		if got := h.reconcile(b); got.Status.Phase != cachev1beta1.BackupCompleted || len(got.Status.Shards) != 1 {
			t.Errorf("%s: %+v", b.Name, got.Status)
		}
	}
}

// TestReconcileRefusesEndpoint: an endpoint outside the operator's policy
// fails the backup (EndpointNotAllowed, naming the flag) before any
// Secret is read or any request sent.
func TestReconcileRefusesEndpoint(t *testing.T) {
	f := startFakeS3(t, "bkt")
	b := newBackup("team-a", "b1", "uid-1", "demo", storeSpec(f.endpoint()))
	vaultSpec := storeSpec(f.endpoint())
	vaultSpec.CredentialsSecretRef = nil
	vaultSpec.CredentialsVault = &cachev1beta1.ObjectStoreVaultCredentials{Vault: cachev1beta1.VaultSource{Address: "https://vault.example", Path: "s3", Role: "r"}}
	bv := newBackup("team-a", "b2", "uid-2", "demo", vaultSpec)
	h := newBackupHarness(t, b, bv, s3Secret("team-a"))
	h.r.Endpoints = EndpointPolicy{Allowlist: []string{"https://s3.eu-west-1.amazonaws.com"}}
	for _, b := range []*cachev1beta1.RedisClusterBackup{b, bv} {
		got := h.reconcile(b)
		ready := condition(got, cachev1beta1.BackupObjectStoreReadyCondition)
		done := condition(got, cachev1beta1.BackupCompleteCondition)
		if got.Status.Phase != cachev1beta1.BackupFailed || ready == nil || ready.Reason != cachev1beta1.BackupEndpointNotAllowedReason ||
			done == nil || done.Reason != cachev1beta1.BackupEndpointNotAllowedReason || !strings.Contains(done.Message, "--"+EndpointAllowlistFlag) {
			t.Errorf("%s: %+v", b.Name, got.Status)
		}
	}
	if n := f.count(); n != 0 {
		t.Errorf("%d requests sent to the store", n)
	}
	if n := h.secrets.count(); n != 0 {
		t.Errorf("%d Secrets read", n)
	}
	// The same store allowed: the backup goes on (here: waits for its cluster).
	ok := newBackup("team-a", "b3", "uid-3", "demo", storeSpec(f.endpoint()))
	if err := h.k8s.Create(context.Background(), ok); err != nil {
		t.Fatal(err)
	}
	h.r.Endpoints = EndpointPolicy{Allowlist: []string{f.endpoint()}}
	if got := h.reconcile(ok); got.Status.Phase != cachev1beta1.BackupPending || f.count() == 0 {
		t.Errorf("an allowed endpoint: %+v (%d requests)", got.Status, f.count())
	}
}

// TestReconcileRedactsStoreAnswers: an endpoint that answers with text
// (status line and minio's error header) reaches status, events and log
// only as "HTTP 500".
func TestReconcileRedactsStoreAnswers(t *testing.T) {
	fewRetries(t)
	f := startFakeS3(t, "bkt")
	// The bucket answers; the manifest's HEAD gets a 500 with text.
	endpoint := rawAnswerFor(t, f, "/bkt/p/team-a/demo/b1/manifest.json",
		"HTTP/1.1 500 "+leaked+"\r\nx-minio-error-desc: \""+leaked+"\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	b := newBackup("team-a", "b1", "uid-1", "demo", storeSpec(endpoint))
	h := newBackupHarness(t, b, s3Secret("team-a"))
	got := h.reconcile(b)
	all := h.everything(got)
	if strings.Contains(all, leaked) || strings.Contains(all, "hunter2") {
		t.Fatalf("the store's answer reached the status, events or log:\n%s", all)
	}
	if !strings.Contains(all, "HTTP 500") {
		t.Fatalf("the error is not told at all:\n%s", all)
	}
}

// rawAnswerFor serves as f does, except for requests of path: those get
// raw, as written.
func rawAnswerFor(t *testing.T, f *fakeS3, path, raw string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			f.serve(w, r)
			return
		}
		writeRaw(w, raw)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
