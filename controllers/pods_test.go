package controllers

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// redisPod is pod c-shard-<shard>-<ord> with the given IP and redis
// container state (nil: no container status yet).
func redisPod(name, ip string, state *corev1.ContainerState) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Status.Phase = corev1.PodPending
	p.Status.PodIP = ip
	if state != nil {
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.RedisContainerName, State: *state}}
	}
	return p
}

// A shard's pods that do not run are Down endpoints, with their IP when
// they have one and why they do not run; an expected pod that does not
// exist is Down "missing". Status names each with the same state. A pod
// with an IP carries its node and whether it is Ready (none of these is).
func TestShardSpecMarksPodsThatDoNotRun(t *testing.T) {
	running := &corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	crashing := &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	terminating := redisPod("c-shard-1-0", "10.0.0.5", running)
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	scheduled := redisPod("c-shard-0-0", "10.0.0.1", running)
	scheduled.Spec.NodeName = "node-a"
	pods := []corev1.Pod{
		scheduled,
		redisPod("c-shard-0-1", "", nil),
		redisPod("c-shard-0-2", "10.0.0.3", crashing),
		terminating,
		// c-shard-1-1 and c-shard-1-2 do not exist.
	}
	shards := groupPods("c", 2, 2, func(int) string { return "h" }, nil, nil, pods)
	want := [][]topology.Endpoint{
		{
			{Name: "c-shard-0-0", Addr: "10.0.0.1:6379", Node: "node-a", NotReady: true},
			{Name: "c-shard-0-1", Down: "Pending"},
			{Name: "c-shard-0-2", Addr: "10.0.0.3:6379", Down: "CrashLoopBackOff", NotReady: true},
		},
		{
			{Name: "c-shard-1-0", Addr: "10.0.0.5:6379", Down: "Terminating", NotReady: true},
			{Name: "c-shard-1-1", Down: "missing"},
			{Name: "c-shard-1-2", Down: "missing"},
		},
	}
	for i, sh := range shards {
		if got := sh.spec().Nodes; !slices.Equal(got, want[i]) {
			t.Errorf("shard %d: %+v, want %+v", i, got, want[i])
		}
	}
	d := topology.Desired{ReplicasPerShard: 2}
	for _, sh := range shards {
		d.Shards = append(d.Shards, sh.spec())
	}
	if err := d.Validate(); err != nil {
		t.Errorf("the engine refuses the shape: %v", err)
	}

	summary := podsSummary(shards, time.Now())
	states := map[string]string{
		"c-shard-0-1": "Pending", "c-shard-0-2": "CrashLoopBackOff", "c-shard-1-0": "Terminating",
		"c-shard-1-1": "missing", "c-shard-1-2": "missing",
	}
	for pod, st := range states {
		if summary.States[pod] != st {
			t.Errorf("%s: state %q, want %q", pod, summary.States[pod], st)
		}
	}
	if summary.States["c-shard-0-0"] != "not ready" {
		t.Errorf("a running pod without the Ready condition: state %q", summary.States["c-shard-0-0"])
	}
	// The crash-looping pod degrades at once; the others just started
	// (the pods here were created at the zero time).
	early := podsSummary(shards, time.Time{})
	if !slices.Equal(early.Failing, []string{"c-shard-0-2"}) || len(early.Overdue) != 0 {
		t.Errorf("failing %v, overdue %v; want only c-shard-0-2 failing", early.Failing, early.Overdue)
	}
	later := podsSummary(shards, time.Time{}.Add(time.Hour))
	if !slices.Equal(later.Failing, []string{"c-shard-0-2"}) || !slices.Equal(later.Overdue, []string{"c-shard-0-0", "c-shard-0-1", "c-shard-1-0"}) {
		t.Errorf("an hour later: failing %v, overdue %v", later.Failing, later.Overdue)
	}
}

// A redis container the kubelet cannot run says why, in words that stay
// the same from one retry to the next, so the status is not rewritten at
// each: a crash loop quotes the exit code and the last log line without
// Redis's pid and timestamp; both image-pull reasons give one text; a
// container still being created is only starting.
func TestPodStateSaysWhyItCannotRun(t *testing.T) {
	waiting := func(reason, msg string, last *corev1.ContainerStateTerminated) corev1.Pod {
		p := redisPod("c-shard-0-1", "10.0.0.2", &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}})
		// The kubelet reports the image that ran last while it fails to
		// pull the one the spec names.
		p.Status.ContainerStatuses[0].Image = "docker.io/library/redis:7.0"
		p.Spec.Containers = []corev1.Container{{Name: resources.RedisContainerName, Image: "registry.invalid/redis:7"}}
		p.Status.ContainerStatuses[0].LastTerminationState.Terminated = last
		return p
	}
	configError := "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, at line 2\n>>> 'maxmemory-polcy allkeys-lru'\nBad directive or wrong number of arguments\n"
	logged := "start: joining as a replica\n1:M 05 Dec 2026 00:01:02.345 # Can't open the log file: Permission denied\n"
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want string
		fail bool
	}{
		{"crash loop, config error", waiting("CrashLoopBackOff", "back-off 20s restarting failed container=redis pod=c-shard-0-1",
			&corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: configError}),
			"CrashLoopBackOff: exit code 1: Bad directive or wrong number of arguments", true},
		{"crash loop, a Redis log line", waiting("CrashLoopBackOff", "back-off 40s restarting failed container=redis pod=c-shard-0-1",
			&corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: logged}),
			"CrashLoopBackOff: exit code 1: Can't open the log file: Permission denied", true},
		{"crash loop, out of memory", waiting("CrashLoopBackOff", "", &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}),
			"CrashLoopBackOff: exit code 137 (OOMKilled)", true},
		{"crash loop, no last state", waiting("CrashLoopBackOff", "", nil), "CrashLoopBackOff", true},
		{"image pull", waiting("ErrImagePull", "rpc error: not found", nil), "cannot pull image registry.invalid/redis:7", true},
		{"image pull back-off", waiting("ImagePullBackOff", `Back-off pulling image "registry.invalid/redis:7"`, nil), "cannot pull image registry.invalid/redis:7", true},
		{"config error", waiting("CreateContainerConfigError", "secret \"c-auth\" not found\nmore", nil),
			"CreateContainerConfigError: secret \"c-auth\" not found", true},
		{"being created", waiting("ContainerCreating", "", nil), "ContainerCreating", false},
	} {
		got, failing := podState(&tc.pod)
		if got != tc.want || failing != tc.fail {
			t.Errorf("%s: state %q (failing %v), want %q (failing %v)", tc.name, got, failing, tc.want, tc.fail)
		}
	}
	long := waiting("CrashLoopBackOff", "", &corev1.ContainerStateTerminated{ExitCode: 1, Message: strings.Repeat("é", 200)})
	if got, _ := podState(&long); len(got) > len("CrashLoopBackOff: exit code 1: ")+maxStateDetail || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("a long log line: state %q (%d bytes)", got, len(got))
	}
}

// A master's pod whose start script refused to start redis-server (no
// replica won the handover's election) names that refusal, with the way
// out, while it is not ready: whether its container is running the
// handover again or waits to restart. Once ready it is up like any other.
func TestPodStateNamesHandoverRefusal(t *testing.T) {
	refusal := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
		Message: "start: no replica of 4f1e was elected within 300000 ms (a majority of the masters must vote), and 10.0.0.2:6379 holds the shard's data: " +
			resources.HandoverRefusedMarker + ", which would make it full-sync an empty dataset"}
	running := redisPod("c-shard-0-0", "10.0.0.1", &corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	running.Status.ContainerStatuses[0].LastTerminationState.Terminated = refusal
	backoff := redisPod("c-shard-0-0", "10.0.0.1", &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}})
	backoff.Status.ContainerStatuses[0].LastTerminationState.Terminated = refusal
	ready := running.DeepCopy()
	ready.Status.ContainerStatuses[0].Ready = true
	other := redisPod("c-shard-0-0", "10.0.0.1", &corev1.ContainerState{Running: &corev1.ContainerStateRunning{}})
	other.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Message: "killed"}
	for name, tc := range map[string]struct {
		pod  corev1.Pod
		want string
	}{
		"running the handover again": {running, handoverRefusedState},
		"waiting to restart":         {backoff, handoverRefusedState},
		"ready since":                {*ready, ""},
		"another exit":               {other, ""},
	} {
		// A refused handover is a wait the start script chose, never failing,
		// even while the container waits in CrashLoopBackOff.
		if got, failing := podState(&tc.pod); got != tc.want || failing {
			t.Errorf("%s: state %q (failing %v), want %q (not failing)", name, got, failing, tc.want)
		}
	}
}
