package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// oomPod is a pod of cluster c whose redis container (memory limit
// 64Mi) runs, not ready yet, after ending as last (nil: it never ended).
func oomPod(name string, uid types.UID, last *corev1.ContainerStateTerminated) *corev1.Pod {
	p := redisPod(name, "10.0.0.1", &corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	p.Namespace, p.UID = "ns", uid
	p.Labels = map[string]string{resources.LabelCluster: "c", resources.LabelManagedBy: resources.ManagedBy}
	p.Spec.Containers = []corev1.Container{{Name: resources.RedisContainerName, Image: "redis:7.0.15",
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}
	p.Status.ContainerStatuses[0].RestartCount = 1
	p.Status.ContainerStatuses[0].LastTerminationState.Terminated = last
	return &p
}

func killed(container string, at time.Time) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", ContainerID: container, FinishedAt: metav1.NewTime(at)}
}

// Each OOM kill of a redis container gives one Warning event OOMKilled
// naming the pod, when, the memory limit and maxmemory (derived from the
// limit), however many passes see it; the same container killed again
// gives another. A kill that ended before the operator's first pass, or a
// last termination that is no OOM kill, gives none.
func TestOOMKillReportedOncePerKill(t *testing.T) {
	ctx := context.Background()
	first := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	rc := &cachev1beta1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Generation: 1},
		Spec: cachev1beta1.RedisClusterSpec{Shards: 1, ReplicasPerShard: 1, Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}}
	master := oomPod("c-shard-0-0", "uid-0", nil)
	old := oomPod("c-shard-0-1", "uid-1", killed("containerd://bbb", first.Add(-time.Hour)))
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(rc, master, old).WithStatusSubresource(master).Build()
	rec := record.NewFakeRecorder(20)
	r := &RedisClusterReconciler{Client: cl, Recorder: rec}
	pass := func(at time.Time) []string {
		t.Helper()
		live := &cachev1beta1.RedisCluster{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(rc), live); err != nil {
			t.Fatal(err)
		}
		s := newScope(live, at, logr.Discard())
		if _, _, err := r.observePods(ctx, s); err != nil {
			t.Fatal(err)
		}
		r.recordEvents(s, true) // an action: recorded even when the status write fails
		return drain(rec)
	}

	if got := pass(first); len(got) != 0 {
		t.Fatalf("first pass, before the kill: %q", got)
	}
	master.Status.ContainerStatuses[0].LastTerminationState.Terminated = killed("containerd://aaa", first.Add(time.Minute))
	if err := cl.Status().Update(ctx, master); err != nil {
		t.Fatal(err)
	}
	want := "Warning OOMKilled Pod c-shard-0-0's redis container was OOM-killed at 2026-12-06T21:01:00Z (memory limit 64Mi, maxmemory 33554432): " +
		"raise spec.resources.limits.memory or lower maxmemory"
	got := pass(first.Add(2 * time.Minute))
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Fatalf("the pass after the kill: %q, want one event starting %q", got, want)
	}
	for i := range 3 {
		if got := pass(first.Add(time.Duration(3+i) * time.Minute)); len(got) != 0 {
			t.Fatalf("pass %d after the kill reported: %q", i+2, got)
		}
	}

	// Killed again: a new container, a new event.
	master.Status.ContainerStatuses[0].RestartCount = 2
	master.Status.ContainerStatuses[0].LastTerminationState.Terminated = killed("containerd://ccc", first.Add(10*time.Minute))
	if err := cl.Status().Update(ctx, master); err != nil {
		t.Fatal(err)
	}
	got = pass(first.Add(11 * time.Minute))
	if len(got) != 1 || !strings.Contains(got[0], "c-shard-0-0's redis container was OOM-killed at 2026-12-06T21:10:00Z") {
		t.Fatalf("after a second kill: %q, want one event for it", got)
	}

	// Restarted for another reason since: nothing, and a later OOM kill of
	// that pod is reported again.
	master.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", ContainerID: "containerd://ddd"}
	if err := cl.Status().Update(ctx, master); err != nil {
		t.Fatal(err)
	}
	if got := pass(first.Add(12 * time.Minute)); len(got) != 0 {
		t.Fatalf("after an exit that is no OOM kill: %q", got)
	}
	master.Status.ContainerStatuses[0].LastTerminationState.Terminated = killed("containerd://eee", first.Add(13*time.Minute))
	if err := cl.Status().Update(ctx, master); err != nil {
		t.Fatal(err)
	}
	if got := pass(first.Add(14 * time.Minute)); len(got) != 1 {
		t.Fatalf("after a third kill: %q, want one event", got)
	}

	// A deleted cluster's record goes.
	r.ooms.forget(client.ObjectKeyFromObject(rc))
	if len(r.ooms.last) != 0 {
		t.Errorf("records after forget: %v", r.ooms.last)
	}
}

// Without a memory limit or maxmemory the message says none.
func TestOOMKillMessageWithoutLimit(t *testing.T) {
	k := oomKill{pod: "c-shard-1-0", at: time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)}
	if got := k.message(""); !strings.HasPrefix(got, "Pod c-shard-1-0's redis container was OOM-killed at 2026-12-06T21:00:00Z (memory limit none, maxmemory none): ") {
		t.Errorf("message %q", got)
	}
}

// A pod running again after an OOM kill and not ready yet says so in its
// state (status names it among the pods not ready); once ready it is up
// like any other, and an up pod that ended otherwise says nothing.
func TestPodStateNamesOOMKill(t *testing.T) {
	at := time.Date(2026, 12, 6, 21, 0, 0, 0, time.UTC)
	restarting := oomPod("c-shard-0-0", "uid-0", killed("containerd://aaa", at))
	ready := restarting.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	other := oomPod("c-shard-0-0", "uid-0", &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error"})
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"restarting": {restarting, oomRestartedState},
		"ready":      {ready, ""},
		"other exit": {other, ""},
	} {
		if got, failing := podState(tc.pod); got != tc.want || failing {
			t.Errorf("%s: state %q (failing %v), want %q (not failing)", name, got, failing, tc.want)
		}
	}
}
