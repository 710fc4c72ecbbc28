// Package crd tests the generated CustomResourceDefinition against a real
// kube-apiserver and etcd (controller-runtime's envtest with the binaries
// that `make tools` builds into bin/): the schema defaults and the CEL rules.
package crd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/redis-operator/redis-operator/apis/cache/v1alpha1"
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

var (
	k8s     client.Client
	testEnv *envtest.Environment
)

func TestMain(m *testing.M) {
	bin, _ := filepath.Abs("../../bin")
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		os.Setenv("KUBEBUILDER_ASSETS", bin)
	}
	// bin/kubectl (make tools) matches the API server's release; it comes
	// before any other kubectl, as in the demo and dev-up.
	os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	scheme := runtime.NewScheme()
	if err := cachev1beta1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "kustomize", "base", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	testEnv = env
	cfg, err := env.Start()
	if err != nil {
		panic("starting envtest (run `make tools` first): " + err.Error())
	}
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		panic(err)
	}
	os.Exit(code)
}

func newCluster(name string) *cachev1beta1.RedisCluster {
	return &cachev1beta1.RedisCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1},
	}
}

// TestSchemaDefaults: an empty spec gets every documented default
// from the schema, so Git and the live object differ only by them.
func TestSchemaDefaults(t *testing.T) {
	ctx := context.Background()
	// As from a YAML manifest: fields left out, not sent as zero values.
	rc := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": cachev1beta1.GroupVersion.String(),
		"kind":       "RedisCluster",
		"metadata":   map[string]interface{}{"name": "defaults", "namespace": "default"},
		"spec":       map[string]interface{}{},
	}}
	if err := k8s.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	got := &cachev1beta1.RedisCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		t.Fatal(err)
	}
	s := got.Spec
	if s.Shards != 3 || s.ReplicasPerShard != 1 || s.Image != "redis:7.0" || s.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("shape defaults: shards=%d replicasPerShard=%d image=%q pullPolicy=%q", s.Shards, s.ReplicasPerShard, s.Image, s.ImagePullPolicy)
	}
	if s.Storage.Size == nil || s.Storage.Size.Cmp(resource.MustParse("1Gi")) != 0 || s.Storage.DeleteClaimPolicy != cachev1beta1.DeleteClaimRetain {
		t.Errorf("storage defaults: size=%v deleteClaimPolicy=%q", s.Storage.Size, s.Storage.DeleteClaimPolicy)
	}
	if s.Exporter.Enabled || s.Exporter.Image == "" || s.LostShardPolicy != cachev1beta1.LostShardWait || s.Paused {
		t.Errorf("other defaults: exporter=%+v lostShardPolicy=%q paused=%v", s.Exporter, s.LostShardPolicy, s.Paused)
	}
}

// TestCELRejects: every CEL rule rejects what it should, and the error names
// the field.
func TestCELRejects(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		mutate    func(*cachev1beta1.RedisCluster)
		wantField string
		wantMsg   string
	}{
		{
			name:      "fewer than three shards",
			mutate:    func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 2 },
			wantField: "spec.shards", wantMsg: "greater than or equal to 3",
		},
		{
			name:      "negative replicas per shard",
			mutate:    func(rc *cachev1beta1.RedisCluster) { rc.Spec.ReplicasPerShard = -1 },
			wantField: "spec.replicasPerShard", wantMsg: "greater than or equal to 0",
		},
		{
			name: "auth with both sources",
			mutate: func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Auth = &cachev1beta1.AuthSpec{
					SecretRef: &cachev1beta1.SecretKeySelector{Name: "s"},
					Vault:     &cachev1beta1.VaultSource{Address: "https://vault:8200", Path: "redis", Role: "redis"},
				}
			},
			wantField: "spec.auth", wantMsg: "at most one of secretRef or vault",
		},
		{
			name: "auth disabled with a source",
			mutate: func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Auth = &cachev1beta1.AuthSpec{Disabled: true, SecretRef: &cachev1beta1.SecretKeySelector{Name: "s"}}
			},
			wantField: "spec.auth", wantMsg: "disabled excludes secretRef and vault",
		},
		{
			name: "vault with neither role nor token",
			mutate: func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Auth = &cachev1beta1.AuthSpec{Vault: &cachev1beta1.VaultSource{Address: "https://vault:8200", Path: "redis"}}
			},
			wantField: "spec.auth.vault", wantMsg: "exactly one of role",
		},
		{
			name: "vault address without scheme",
			mutate: func(rc *cachev1beta1.RedisCluster) {
				rc.Spec.Auth = &cachev1beta1.AuthSpec{Vault: &cachev1beta1.VaultSource{Address: "vault:8200", Path: "redis", Role: "r"}}
			},
			wantField: "spec.auth.vault.address", wantMsg: "should match",
		},
		{
			name:      "unknown delete claim policy",
			mutate:    func(rc *cachev1beta1.RedisCluster) { rc.Spec.Storage.DeleteClaimPolicy = "Shred" },
			wantField: "spec.storage.deleteClaimPolicy", wantMsg: "Unsupported value",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newCluster("cel-" + strings.ReplaceAll(tc.name, " ", "-"))
			tc.mutate(rc)
			assertInvalid(t, k8s.Create(ctx, rc), tc.wantField, tc.wantMsg)
		})
	}
}

// TestStorageClassImmutable: once set, spec.storage.storageClassName cannot
// change (a transition rule), while other fields still can.
func TestStorageClassImmutable(t *testing.T) {
	ctx := context.Background()
	rc := newCluster("immutable-sc")
	rc.Spec.Storage.StorageClassName = ptr.To("fast")
	if err := k8s.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	rc.Spec.Shards = 4
	if err := k8s.Update(ctx, rc); err != nil {
		t.Fatalf("changing shards was rejected: %v", err)
	}
	rc.Spec.Storage.StorageClassName = ptr.To("slow")
	assertInvalid(t, k8s.Update(ctx, rc), "spec.storage.storageClassName", "immutable")
}

// TestV1alpha1ReplicasRule: v1alpha1 replicas must map to at least three shards.
func TestV1alpha1ReplicasRule(t *testing.T) {
	ctx := context.Background()
	for _, replicas := range []int32{1, 2, 4, -3} {
		rc := &cachev1alpha1.RedisCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "alpha-bad", Namespace: "default"},
			Spec:       cachev1alpha1.RedisClusterSpec{Replicas: replicas},
		}
		assertInvalid(t, k8s.Create(ctx, rc), "spec.replicas", "spec.replicas must be")
	}
}

func assertInvalid(t *testing.T, err error, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection of %s", field)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error is not Invalid: %v", err)
	}
	if !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("error %q does not name %s with %q", err, field, msg)
	}
}

// TestNameLength: a name whose StatefulSets or pods could not exist is
// rejected at admission (found by a tester: a 48-character name sat Pending
// forever).
func TestNameLength(t *testing.T) {
	ctx := context.Background()
	rc := newCluster(strings.Repeat("a", 43))
	assertInvalid(t, k8s.Create(ctx, rc), "metadata.name", "at most 42 characters")
	if err := k8s.Create(ctx, newCluster(strings.Repeat("b", 42))); err != nil {
		t.Fatalf("a 42-character name was rejected: %v", err)
	}
}

// TestZeroReplicasPerShardKept: replicasPerShard 0 is stored as 0, not
// replaced by the schema default of 1, also after a full-object update such
// as the controller's finalizer update.
func TestZeroReplicasPerShardKept(t *testing.T) {
	ctx := context.Background()
	rc := newCluster("zero-replicas")
	rc.Spec.ReplicasPerShard = 0
	if err := k8s.Create(ctx, rc); err != nil {
		t.Fatal(err)
	}
	rc.Finalizers = append(rc.Finalizers, cachev1beta1.Finalizer)
	if err := k8s.Update(ctx, rc); err != nil {
		t.Fatal(err)
	}
	got := &cachev1beta1.RedisCluster{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ReplicasPerShard != 0 {
		t.Fatalf("replicasPerShard = %d after create and update, want 0", got.Spec.ReplicasPerShard)
	}
}
