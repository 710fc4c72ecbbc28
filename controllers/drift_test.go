package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// TestChildrenDriftBack: hand edits to what the operator owns are reverted
// in the next pass (the StatefulSet scaled to 0, an edited redis.conf, a
// removed Service port), and the pass after writes nothing again.
func TestChildrenDriftBack(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "drift")
	waitSettled(t, rc)
	reconcileUntilQuiet(t, rc)

	sts := &appsv1.StatefulSet{}
	key := client.ObjectKey{Namespace: ns, Name: "drift-shard-1"}
	if err := k8s.Get(testCtx, key, sts); err != nil {
		t.Fatal(err)
	}
	sts.Spec.Replicas = ptr.To[int32](0)
	if err := k8s.Update(testCtx, sts); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	cmKey := client.ObjectKey{Namespace: ns, Name: "drift-config"}
	if err := k8s.Get(testCtx, cmKey, cm); err != nil {
		t.Fatal(err)
	}
	conf := cm.Data["redis.conf"]
	cm.Data["redis.conf"] = "maxmemory 1mb\n"
	if err := k8s.Update(testCtx, cm); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{}
	svcKey := client.ObjectKey{Namespace: ns, Name: "drift-headless"}
	if err := k8s.Get(testCtx, svcKey, svc); err != nil {
		t.Fatal(err)
	}
	ports := len(svc.Spec.Ports)
	if ports < 2 {
		t.Fatalf("headless Service has %d ports; the test removes one of two or more", ports)
	}
	svc.Spec.Ports = svc.Spec.Ports[:ports-1]
	if err := k8s.Update(testCtx, svc); err != nil {
		t.Fatal(err)
	}

	// Each edit is an event on an owned object: the pass it starts
	// reverts it.
	eventually(t, "the edits reverted", func() error {
		if err := k8s.Get(testCtx, key, sts); err != nil {
			return err
		}
		if *sts.Spec.Replicas != 2 {
			return fmt.Errorf("StatefulSet scaled to 0 by hand has %d replicas, want 2", *sts.Spec.Replicas)
		}
		if err := k8s.Get(testCtx, cmKey, cm); err != nil {
			return err
		}
		if cm.Data["redis.conf"] != conf {
			return fmt.Errorf("edited redis.conf not reverted:\n%s", cm.Data["redis.conf"])
		}
		if err := k8s.Get(testCtx, svcKey, svc); err != nil {
			return err
		}
		if len(svc.Spec.Ports) != ports {
			return fmt.Errorf("removed Service port not restored: %d ports, want %d", len(svc.Spec.Ports), ports)
		}
		return nil
	})

	// Settled again: no write per pass.
	reconcileUntilQuiet(t, rc)
	mark := writes.mark()
	if _, err := reconciler.Reconcile(testCtx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
		t.Fatal(err)
	}
	if w := writes.in(ns, mark); len(w) > 0 {
		t.Errorf("a settled cluster wrote after the revert: %s", strings.Join(w, "; "))
	}
}

func TestDrifted(t *testing.T) {
	base := func() *corev1.Service {
		return &corev1.Service{Spec: corev1.ServiceSpec{ClusterIP: "None", Ports: []corev1.ServicePort{{Name: "redis", Port: 6379}}}}
	}
	for _, tc := range []struct {
		name   string
		live   func(*corev1.Service)
		drifts bool
	}{
		{name: "equal"},
		{name: "API defaults and others' fields", live: func(s *corev1.Service) {
			s.Spec.Ports[0].Protocol = corev1.ProtocolTCP
			s.Spec.SessionAffinity = corev1.ServiceAffinityNone
			s.Labels = map[string]string{"team": "x"}
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "extra", Port: 1})
		}},
		{name: "port changed", live: func(s *corev1.Service) { s.Spec.Ports[0].Port = 7000 }, drifts: true},
		{name: "port removed", live: func(s *corev1.Service) { s.Spec.Ports = nil }, drifts: true},
	} {
		live := base()
		if tc.live != nil {
			tc.live(live)
		}
		path, got, err := drifted(base(), live)
		if err != nil || got != tc.drifts {
			t.Errorf("%s: drifted = %v (%s), %v; want %v", tc.name, got, path, err, tc.drifts)
		}
	}
	q := func(s string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(s)}}}}
	}
	if path, got, _ := drifted(q("1024Mi"), q("1Gi")); got {
		t.Errorf("1024Mi and 1Gi differ at %s", path)
	}
	if _, got, _ := drifted(q("2Gi"), q("1Gi")); !got {
		t.Error("2Gi and 1Gi are equal")
	}
}

// TestLeavingShardIsRecreated: a shard being removed by a scale-in is
// remembered in status.leavingShards; its StatefulSet deleted by hand comes
// back (same name, so its claims, untouched, come back with it) and so does
// one scaled to 0 by hand. (Without the engine, which never runs in
// envtest, it is never reported drained, so it is never removed.)
func TestLeavingShardIsRecreated(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "lv", func(rc *cachev1beta1.RedisCluster) { rc.Spec.Shards = 4 })
	waitSettled(t, rc)
	eventually(t, "four shard StatefulSets", func() error {
		if n := len(statefulSetVersions(t, ns)); n != 4 {
			return fmt.Errorf("%d StatefulSets", n)
		}
		return nil
	})
	pvc := claim(t, ns, "lv", 3, 0)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := getCluster(t, rc)
		got.Spec.Shards = 3
		return k8s.Update(testCtx, got)
	})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "status.leavingShards", func() error {
		got := getCluster(t, rc)
		if !slices.Equal(got.Status.LeavingShards, []string{"lv-shard-3"}) {
			return fmt.Errorf("leavingShards %v", got.Status.LeavingShards)
		}
		return nil
	})
	key := client.ObjectKey{Namespace: ns, Name: "lv-shard-3"}
	old := &appsv1.StatefulSet{}
	if err := k8s.Get(testCtx, key, old); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(testCtx, old); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	eventually(t, "the leaving shard's StatefulSet recreated", func() error {
		if err := k8s.Get(testCtx, key, sts); err != nil {
			return err
		}
		if sts.UID == old.UID {
			return errors.New("not deleted yet")
		}
		return nil
	})
	if *sts.Spec.Replicas != 2 || len(sts.Spec.VolumeClaimTemplates) == 0 || sts.Spec.VolumeClaimTemplates[0].Name != resources.DataVolumeName {
		t.Errorf("recreated StatefulSet: %d replicas, claim templates %v; want 2 pods mounting %s", *sts.Spec.Replicas, sts.Spec.VolumeClaimTemplates, pvc.Name)
	}

	sts.Spec.Replicas = ptr.To[int32](0)
	if err := k8s.Update(testCtx, sts); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leaving shard scaled back up", func() error {
		if err := k8s.Get(testCtx, key, sts); err != nil {
			return err
		}
		if *sts.Spec.Replicas != 2 {
			return fmt.Errorf("%d replicas", *sts.Spec.Replicas)
		}
		return nil
	})
	got := getCluster(t, rc)
	if !slices.Equal(got.Status.LeavingShards, []string{"lv-shard-3"}) {
		t.Errorf("leavingShards %v after the recreation", got.Status.LeavingShards)
	}
	if err := k8s.Get(testCtx, client.ObjectKeyFromObject(pvc), pvc); err != nil || pvc.DeletionTimestamp != nil {
		t.Errorf("the leaving shard's claim: %v, deletion %v", err, pvc.DeletionTimestamp)
	}

	// StatefulSet and claims both gone: nothing left to keep, the shard is
	// forgotten (the engine would report its slots lost), not recreated.
	if err := k8s.Delete(testCtx, pvc); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(testCtx, sts); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leaving shard forgotten", func() error {
		got := getCluster(t, rc)
		if len(got.Status.LeavingShards) != 0 {
			return fmt.Errorf("leavingShards %v", got.Status.LeavingShards)
		}
		return nil
	})
	if err := k8s.Get(testCtx, key, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("StatefulSet of a shard without claims: %v, want it not recreated", err)
	}
}

// TestStatusWritesStartNoPass: a status write (the controller's own, here
// the test's) does not start a pass; a spec change does. (Field case R20:
// each of the controller's status writes started another pass, racing the
// cache into conflicts, a loop of thousands of events.) A pass would undo
// the test's write: the controller's writes show whether one ran. Pods
// never start in envtest, so the manager also looks again every
// busyRequeue on its own; such a pass may land in the window, so the
// window is tried up to three times and a storm is one that every try
// shows.
func TestStatusWritesStartNoPass(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "nostorm")
	waitSettled(t, rc)
	reconcileUntilQuiet(t, rc)
	var seen []string
	for try := 0; try < 3; try++ {
		mark := writes.mark()
		for i := 0; i < 3; i++ {
			got := getCluster(t, rc)
			patch := client.MergeFrom(got.DeepCopy())
			got.Status.ReadyReplicas = int32(10 + i)
			if err := k8s.Status().Patch(testCtx, got, patch); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Second)
		w := writes.in(ns, mark)
		if len(w) == 0 {
			seen = nil
			break
		}
		seen = append(seen, strings.Join(w, "; "))
	}
	if len(seen) > 0 {
		t.Errorf("3 status writes started passes that wrote, in each of 3 tries: %s", strings.Join(seen, " | "))
	}
	mark := writes.mark()
	updateSpec(t, rc, func(got *cachev1beta1.RedisCluster) { got.Spec.ReplicasPerShard = 2 })
	eventually(t, "a pass for the spec change", func() error {
		if len(writes.in(ns, mark)) == 0 {
			return errors.New("no pass")
		}
		return nil
	})
}

// TestStoppingOperatorLogsNoError: a pass whose context the manager cancels
// (the operator stops) returns no error, so controller-runtime logs no
// "Reconciler error" with a stack trace for each cluster it was working on.
func TestStoppingOperatorLogsNoError(t *testing.T) {
	ns := newNamespace(t)
	rc := newCluster(t, ns, "stopping")
	waitSettled(t, rc)
	reconcileUntilQuiet(t, rc)
	// A status the pass must correct, so that it has a write to lose (a
	// status-only change starts no pass of the manager's own).
	got := getCluster(t, rc)
	patch := client.MergeFrom(got.DeepCopy())
	got.Status.ReadyReplicas = 42
	if err := k8s.Status().Patch(testCtx, got, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache has the patched status", func() error {
		c := &cachev1beta1.RedisCluster{}
		if err := reconciler.Client.Get(testCtx, client.ObjectKeyFromObject(rc), c); err != nil || c.Status.ReadyReplicas != 42 {
			return fmt.Errorf("readyReplicas %d (%v)", c.Status.ReadyReplicas, err)
		}
		return nil
	})
	ctx, cancel := context.WithCancel(testCtx)
	cancel()
	if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(rc)}); err != nil {
		t.Fatalf("a pass cut short by the operator stopping returned %v", err)
	}
}
