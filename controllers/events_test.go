package controllers

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// A pass removed a drained shard, then its status write conflicted (it
// started from a stale cached object). The removal's event is recorded
// anyway, and only once; the transition events wait for a write that
// succeeds. (The e2e 3→8→5 scenario lost its ShardRemoved events this way.)
func TestActionEventsSurviveAStatusConflict(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := cachev1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	conflict := true
	cl := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme).WithObjects(rc).WithStatusSubresource(rc).Build(), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if conflict {
				return apierrors.NewConflict(schema.GroupResource{Group: "cache.redis.io", Resource: "redisclusters"}, obj.GetName(), errors.New("the object has been modified"))
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	rec := record.NewFakeRecorder(20)
	r := &RedisClusterReconciler{Client: cl, Recorder: rec}
	live := &cachev1beta1.RedisCluster{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), live); err != nil {
		t.Fatal(err)
	}
	s := newScope(live, time.Now(), logr.Discard())
	s.obs = healthyObservation()
	s.did("ShardRemoved", "Shard c-shard-3 owns no slots and was forgotten by the cluster")
	s.warning("SourceFailed", "a status-derived warning")

	if err := r.writeStatus(ctx, s, nil, true); !apierrors.IsConflict(err) {
		t.Fatalf("write error %v, want a conflict", err)
	}
	if got := drain(rec); len(got) != 1 || !strings.HasPrefix(got[0], "Normal ShardRemoved ") {
		t.Fatalf("events after the conflict: %q, want only the ShardRemoved action", got)
	}

	conflict = false
	if err := r.writeStatus(ctx, s, nil, true); err != nil {
		t.Fatalf("second write: %v", err)
	}
	got := drain(rec)
	joined := strings.Join(got, "\n")
	if strings.Contains(joined, "ShardRemoved") || !strings.Contains(joined, "Warning SourceFailed ") || !strings.Contains(joined, "Normal Ready ") {
		t.Fatalf("events after the successful write: %q, want SourceFailed and Ready, ShardRemoved not again", got)
	}
}

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
