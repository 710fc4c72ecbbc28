package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/status"
)

// A pass removed a drained shard, then its status write conflicted (it
// started from a stale cached object). The removal's event is recorded
// anyway, and only once; the transition events wait for a write that
// succeeds. (The e2e 3→8→5 scenario lost its ShardRemoved events this way.)
func TestActionEventsSurviveAStatusConflict(t *testing.T) {
	ctx := context.Background()
	scheme := testScheme(t)
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

// A status write lost to a conflict (the pass read a stale cached object)
// is retried at once on the object read fresh, and its events are recorded
// once; an object write lost to a conflict ends the pass without an error
// (no "Reconciler error" log, no ReconcileError in status) and with a
// requeue. Field case R20: 799 error lines with stack traces.
func TestConflictsAreQuietRetries(t *testing.T) {
	ctx := context.Background()
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	conflicts := 1
	cl := interceptor.NewClient(fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(rc).WithStatusSubresource(rc).Build(), interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(schema.GroupResource{Group: "cache.redis.io", Resource: "redisclusters"}, obj.GetName(), errors.New("the object has been modified"))
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	rec := record.NewFakeRecorder(20)
	r := &RedisClusterReconciler{Client: cl, Recorder: rec}
	newPass := func() *scope {
		live := &cachev1beta1.RedisCluster{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), live); err != nil {
			t.Fatal(err)
		}
		s := newScope(live, time.Now(), logr.Discard())
		s.obs = healthyObservation()
		return s
	}

	s := newPass()
	s.did("ShardRemoved", "Shard c-shard-3 owns no slots and was forgotten by the cluster")
	res, err := r.finishPass(ctx, s, ctrl.Result{RequeueAfter: time.Minute}, nil)
	if err != nil || res.RequeueAfter != time.Minute {
		t.Fatalf("pass with one status conflict: %+v, %v; want the pass's own result", res, err)
	}
	got := &cachev1beta1.RedisCluster{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != cachev1beta1.PhaseReady {
		t.Errorf("status not written after the conflict: phase %q", got.Status.Phase)
	}
	events := strings.Join(drain(rec), "\n")
	if strings.Count(events, "ShardRemoved") != 1 || strings.Count(events, "Normal Ready ") != 1 {
		t.Errorf("events %q, want ShardRemoved and Ready once each", events)
	}

	// A conflict on an object write during the pass.
	s = newPass()
	objErr := fmt.Errorf("applying StatefulSet c-shard-0: %w",
		apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "c-shard-0", errors.New("the object has been modified")))
	s.obs.ReconcileErr = objErr
	res, err = r.finishPass(ctx, s, ctrl.Result{}, objErr)
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("pass with an object conflict: %+v, %v; want a requeue and no error", res, err)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, cachev1beta1.RedisClusterDegradedCondition); c == nil || c.Reason == cachev1beta1.RedisClusterReconcileErrorReason {
		t.Errorf("Degraded %+v after an ordinary conflict", c)
	}

	// Every status write conflicts: still no error, a requeue.
	conflicts = 100
	s = newPass()
	s.obs.Pods = status.Pods{Expected: 6, Ready: 5, NotReady: []string{"c-shard-0-0"}}
	res, err = r.finishPass(ctx, s, ctrl.Result{}, nil)
	if err != nil || res.RequeueAfter == 0 {
		t.Errorf("pass whose status writes all conflict: %+v, %v; want a requeue and no error", res, err)
	}
}

// A failover shows as one MasterChanged event naming the new master.
func TestMasterChangedEvent(t *testing.T) {
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1}}
	rc.Status.Shards = []cachev1beta1.ShardStatus{{Name: "c-shard-0", MasterPod: "c-shard-0-0", MasterNodeID: ids("a")}}
	rec := record.NewFakeRecorder(10)
	r := &RedisClusterReconciler{Recorder: rec}
	s := newScope(rc, time.Now(), logr.Discard())
	s.rc.Status.Shards = []cachev1beta1.ShardStatus{{Name: "c-shard-0", MasterPod: "c-shard-0-1", MasterNodeID: ids("a1")}}
	r.emitTransitionEvents(s)
	got := drain(rec)
	if len(got) != 1 || !strings.HasPrefix(got[0], "Normal MasterChanged Shard c-shard-0: the master is now c-shard-0-1") {
		t.Errorf("events %q", got)
	}
	s = newScope(s.rc.DeepCopy(), time.Now(), logr.Discard())
	r.emitTransitionEvents(s)
	if got := drain(rec); len(got) != 0 {
		t.Errorf("events of an unchanged master: %q", got)
	}
}

// A pass that started from a stale cached object (a rotation still in its
// grace period) must not overwrite the status a newer pass wrote meanwhile
// (the rotation finished): its write conflicts and it writes nothing,
// leaving the next pass to start from the fresh status. (The e2e Vault
// rotation once stayed in GracePeriod for good after such a retry.)
func TestStaleStatusNeverOverwritesNewer(t *testing.T) {
	ctx := context.Background()
	scheme := testScheme(t)
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 3, ReplicasPerShard: 1}}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(rc).WithStatusSubresource(rc).Build()
	r := &RedisClusterReconciler{Client: cl, Recorder: record.NewFakeRecorder(20)}
	stale := &cachev1beta1.RedisCluster{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), stale); err != nil {
		t.Fatal(err)
	}
	inGrace := &cachev1beta1.CredentialsStatus{Source: "Vault", Version: "v1", RotationStep: "GracePeriod"}
	stale.Status.Credentials = inGrace.DeepCopy()
	if err := cl.Status().Update(ctx, stale); err != nil {
		t.Fatal(err)
	}
	// A newer pass finished the rotation; this pass's cache still holds the grace period.
	newer := stale.DeepCopy()
	newer.Status.Credentials = &cachev1beta1.CredentialsStatus{Source: "Vault", Version: "v2"}
	if err := cl.Status().Update(ctx, newer); err != nil {
		t.Fatal(err)
	}

	s := newScope(stale, time.Now(), logr.Discard())
	s.obs = healthyObservation()
	s.rc.Status.Credentials = inGrace.DeepCopy()
	if err := r.writeStatus(ctx, s, nil, true); !apierrors.IsConflict(err) {
		t.Fatalf("write error %v, want the conflict (no retry on a status that moved on)", err)
	}
	got := &cachev1beta1.RedisCluster{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), got); err != nil {
		t.Fatal(err)
	}
	if c := got.Status.Credentials; c == nil || c.Version != "v2" || c.RotationStep != "" {
		t.Fatalf("credentials after the stale pass: %+v, want the newer v2 with no rotation step", c)
	}
}
