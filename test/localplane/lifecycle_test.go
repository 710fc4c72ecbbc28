package localplane_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// TestPodLifecycle covers what a kubelet does around one pod: an init
// container runs first, a tcpSocket readiness probe gates Ready, a failing
// liveness probe restarts the container, so does a new image, the preStop hook runs on
// deletion, the redis_exporter image runs the local exporter, and an
// image without a local stand-in is reported, not run.
func TestPodLifecycle(t *testing.T) {
	p := startPlane(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	c := p.Client
	hostDir := t.TempDir()
	dirType := corev1.HostPathDirectory

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "lifecycle", Namespace: "default"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{
				Name: "init", Image: "redis:7.0",
				Command:      []string{"sh", "-c", "echo initialised > /work/init-ran"},
				VolumeMounts: []corev1.VolumeMount{{Name: "work", MountPath: "/work"}},
			}},
			Containers: []corev1.Container{{
				Name: "redis", Image: "redis:7.0",
				Args: []string{"--bind", "$(POD_IP)", "--save", ""},
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(6379)}},
					PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
				},
				// Fails once /work/fail exists; the test creates it.
				LivenessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "test ! -e /work/fail"}}},
					PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
				},
				Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
					Command: []string{"sh", "-c", "cat /work/init-ran > /host/prestop-ran"}}}},
				// /tmp first: the plane's state (and so every volume's
				// source) is under /tmp here, and must stay reachable.
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/tmp"}, {Name: "work", MountPath: "/work"}, {Name: "host", MountPath: "/host"}},
			}, {
				Name: "exporter", Image: "oliver006/redis_exporter:v1.62.0",
				Args: []string{"--redis.addr=redis://$(POD_IP):6379", "--web.listen-address=$(POD_IP):9121"},
				Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/metrics", Port: intstr.FromInt32(9121)}},
					PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostDir, Type: &dirType}}},
			},
		},
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(ctx, t, c, "lifecycle", "Ready", func(p *corev1.Pod) bool {
		return conditionStatus(p, corev1.PodReady) == corev1.ConditionTrue
	})
	if st := got.Status.InitContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 0 {
		t.Fatalf("init container status = %+v, want terminated with exit code 0", st)
	}
	if got.Status.Phase != corev1.PodRunning {
		t.Errorf("phase = %s, want Running", got.Status.Phase)
	}

	// Make the liveness probe fail: the container is killed and restarted.
	workDir := filepath.Join(p.StateDir, "pods", "default_lifecycle_"+string(got.UID), "volumes", "work")
	if err := os.WriteFile(filepath.Join(workDir, "fail"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitPod(ctx, t, c, "lifecycle", "a restart of redis", func(p *corev1.Pod) bool {
		s := containerStatus(p, "redis")
		return s != nil && s.RestartCount >= 1
	})
	if err := os.Remove(filepath.Join(workDir, "fail")); err != nil {
		t.Fatal(err)
	}
	got = waitPod(ctx, t, c, "lifecycle", "Ready again", func(p *corev1.Pod) bool {
		return conditionStatus(p, corev1.PodReady) == corev1.ConditionTrue
	})
	if s := containerStatus(got, "redis"); s.LastTerminationState.Terminated == nil {
		t.Errorf("redis lastState = %+v, want terminated", s.LastTerminationState)
	}

	// A new image restarts the container in place, as the kubelet does.
	restarts := containerStatus(got, "redis").RestartCount
	patch := []byte(`{"spec":{"containers":[{"name":"redis","image":"redis:7.2"}]}}`)
	if _, err := c.CoreV1().Pods("default").Patch(ctx, "lifecycle", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	got = waitPod(ctx, t, c, "lifecycle", "running redis:7.2", func(p *corev1.Pod) bool {
		s := containerStatus(p, "redis")
		return s != nil && s.Image == "redis:7.2" && s.State.Running != nil && s.RestartCount == restarts+1
	})

	// Deletion runs preStop (which still sees the emptyDir), then stops.
	if err := c.CoreV1().Pods("default").Delete(ctx, "lifecycle", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDeleted(ctx, t, c, "lifecycle")
	b, err := os.ReadFile(filepath.Join(hostDir, "prestop-ran"))
	if err != nil || strings.TrimSpace(string(b)) != "initialised" {
		t.Errorf("preStop output = %q, %v; want %q", b, err, "initialised")
	}
	if ps := processesMentioning(got.Status.PodIP + ":"); len(ps) > 0 {
		t.Errorf("processes left after deletion: %v", ps)
	}

	// An image with no local stand-in waits with a clear reason.
	bad := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "unknown-image", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/nginx:1.27"}}},
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = waitPod(ctx, t, c, "unknown-image", "ErrImagePull", func(p *corev1.Pod) bool {
		s := containerStatus(p, "app")
		return s != nil && s.State.Waiting != nil && s.State.Waiting.Reason == "ErrImagePull"
	})
	if msg := containerStatus(got, "app").State.Waiting.Message; !strings.Contains(msg, "no local stand-in") {
		t.Errorf("waiting message = %q, want it to say the image has no local stand-in", msg)
	}
	if got.Status.Phase != corev1.PodPending {
		t.Errorf("phase = %s, want Pending", got.Status.Phase)
	}
}

func waitPod(ctx context.Context, t *testing.T, c kubernetes.Interface, name, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		pod, err = c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && ok(pod), nil
	})
	if err != nil {
		t.Fatalf("waiting for pod %s to be %s (status: %+v): %v", name, what, pod.Status, err)
	}
	return pod
}

func waitDeleted(ctx context.Context, t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := c.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("pod %s not deleted: %v", name, err)
	}
}

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}
