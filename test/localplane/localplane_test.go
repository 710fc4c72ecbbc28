package localplane_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/redis-operator/redis-operator/test/localplane"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
)

// binDir is where `make tools` builds etcd, kube-apiserver and
// kube-controller-manager: bin/ at the top of the repository.
func binDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("LOCALPLANE_BIN_DIR"); d != "" {
		return d
	}
	d, err := filepath.Abs("../../bin")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startPlane starts a plane of nodes nodes (localplane.DefaultNodes when
// 0) for t in a state directory of its own, stopped when t ends.
func startPlane(t *testing.T, nodes int) *localplane.Plane {
	t.Helper()
	p, err := localplane.Start(t.Context(), localplane.Options{StateDir: t.TempDir(), BinDir: binDir(t), Nodes: nodes})
	if err != nil {
		t.Fatalf("starting the local plane (needs root, `make tools` and `make images`): %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}

// TestRedisStatefulSet runs a 3-pod Redis StatefulSet on the default
// plane: each pod gets its own IP in the nodes' pod ranges, its config from
// a ConfigMap and its data dir from its own claim, provisioned as a
// directory under the state directory's volumes/<namespace>/; a deleted
// pod comes back with its data; deleting the StatefulSet leaves no
// redis-server behind.
func TestRedisStatefulSet(t *testing.T) {
	p := startPlane(t, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	c := p.Client
	ns := "default"

	_, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "redis-config"},
		Data:       map[string]string{"redis.conf": "port 6379\nappendonly yes\nappendfsync always\ndir /data\n"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, redisStatefulSet(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pods := waitReadyPods(ctx, t, c, ns, 3, nil)
	ips := map[string]string{}
	for _, pod := range pods {
		ip := pod.Status.PodIP
		if !podRange.Contains(net.ParseIP(ip)) {
			t.Errorf("pod %s has IP %q, want its own address in %s", pod.Name, ip, podnet.NodeCIDRs)
		}
		if other, dup := ips[ip]; dup {
			t.Errorf("pods %s and %s share IP %s", other, pod.Name, ip)
		}
		ips[ip] = pod.Name
		if got := conditionStatus(&pod, corev1.PodScheduled); got != corev1.ConditionTrue {
			t.Errorf("pod %s: PodScheduled is %q", pod.Name, got)
		}
		if got := conditionStatus(&pod, corev1.PodInitialized); got != corev1.ConditionTrue {
			t.Errorf("pod %s: Initialized is %q", pod.Name, got)
		}
		// The server binds $(POD_IP) (downward API, expanded in args),
		// runs as the pod's user, and read redis.conf from the ConfigMap.
		rdb := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(ip, "6379")})
		cfg, err := rdb.ConfigGet(ctx, "*").Result()
		rdb.Close()
		if err != nil {
			t.Fatalf("CONFIG GET on %s: %v", pod.Name, err)
		}
		if cfg["bind"] != ip || cfg["appendonly"] != "yes" || cfg["dir"] != "/data" {
			t.Errorf("pod %s: bind=%q appendonly=%q dir=%q, want %s, yes, /data", pod.Name, cfg["bind"], cfg["appendonly"], cfg["dir"], ip)
		}
	}

	// A key written to redis-1 survives the pod's deletion: its claim's
	// directory is mounted at /data again in the new pod.
	old := podNamed(pods, "redis-1")
	put := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(old.Status.PodIP, "6379")})
	if err := put.Set(ctx, "survivor", "still here", 0).Err(); err != nil {
		t.Fatal(err)
	}
	put.Close()
	claim, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-redis-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	aof := filepath.Join(p.StateDir, "volumes", ns, "data-redis-1-"+string(claim.UID), "appendonlydir")
	if entries, err := os.ReadDir(aof); err != nil || len(entries) == 0 {
		t.Errorf("redis-1's append-only files in its claim's directory %s: %v, %v", aof, entries, err)
	}
	if err := c.CoreV1().Pods(ns).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(ctx, t, old.Status.PodIP)
	pods = waitReadyPods(ctx, t, c, ns, 3, func(pod *corev1.Pod) bool { return pod.Name != old.Name || pod.UID != old.UID })
	renewed := podNamed(pods, "redis-1")
	get := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(renewed.Status.PodIP, "6379")})
	val, err := get.Get(ctx, "survivor").Result()
	get.Close()
	if err != nil || val != "still here" {
		t.Fatalf("GET survivor on the new redis-1 = %q, %v; want %q", val, err, "still here")
	}

	// Deleting the StatefulSet stops every pod and its processes.
	if err := c.AppsV1().StatefulSets(ns).Delete(ctx, "redis", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=redis"})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("pods not gone after deleting the StatefulSet: %v", err)
	}
	for _, pod := range pods {
		waitGone(ctx, t, pod.Status.PodIP)
	}
}

func redisStatefulSet() *appsv1.StatefulSet {
	labels := map[string]string{"app": "redis"}
	uid, grace := int64(999), int64(10)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "redis"},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    new(int32(3)),
			ServiceName: "redis",
			// The pods start at once: each node's first pod waits for its
			// pull, and one after the other they would wait in turn.
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					SecurityContext:               &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid},
					Containers: []corev1.Container{{
						Name:    "redis",
						Image:   "redis:7.0",
						Command: []string{"redis-server", "/etc/redis/redis.conf"},
						// No password: protected mode would refuse the
						// probe's connection from the pod IP, which is not
						// loopback in a pod network namespace (nor on a
						// real cluster).
						Args: []string{"--bind", "$(POD_IP)", "--protected-mode", "no"},
						Env: []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
						// As with the kubelet, $(POD_IP) in a probe command
						// expands only static env values, so the probe
						// reads the variable through the shell.
						ReadinessProbe: &corev1.Probe{
							ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", `redis-cli -h "$POD_IP" ping | grep -q PONG`}}},
							PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 3, SuccessThreshold: 1,
						},
						VolumeMounts: []corev1.VolumeMount{
							{Name: "config", MountPath: "/etc/redis/redis.conf", SubPath: "redis.conf"},
							{Name: "data", MountPath: "/data"},
						},
					}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "redis-config"}}}}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// waitReadyPods waits until want pods labelled app=redis are Ready (and
// pass accept, when given) and returns them.
func waitReadyPods(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, want int, accept func(*corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var ready []corev1.Pod
	var last string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=redis"})
		if err != nil {
			return false, nil
		}
		ready = ready[:0]
		var states []string
		for _, pod := range list.Items {
			states = append(states, fmt.Sprintf("%s:%s/%s", pod.Name, pod.Status.Phase, conditionStatus(&pod, corev1.PodReady)))
			if conditionStatus(&pod, corev1.PodReady) == corev1.ConditionTrue && pod.DeletionTimestamp == nil && (accept == nil || accept(&pod)) {
				ready = append(ready, pod)
			}
		}
		last = strings.Join(states, " ")
		return len(ready) == want, nil
	})
	if err != nil {
		t.Fatalf("waiting for %d ready pods (last seen: %s): %v", want, last, err)
	}
	return ready
}

// waitGone waits until nothing listens on ip:6379 and no process carries
// ip in its command line (redis-server shows its address there).
func waitGone(ctx context.Context, t *testing.T, ip string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "6379"), time.Second); err == nil {
			conn.Close()
			return false, nil
		}
		return len(processesMentioning(ip+":")) == 0, nil
	})
	if err != nil {
		t.Fatalf("redis-server on %s still running (%v): %v", ip, processesMentioning(ip+":"), err)
	}
}

func processesMentioning(s string) []string {
	var out []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, filepath.Base(filepath.Dir(f))+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

func podNamed(pods []corev1.Pod, name string) *corev1.Pod {
	for i := range pods {
		if pods[i].Name == name {
			return &pods[i]
		}
	}
	return nil
}

func conditionStatus(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// podRange is where pod IPs come from: the nodes' bridges.
var podRange = func() *net.IPNet {
	_, n, _ := net.ParseCIDR(podnet.NodeCIDRs)
	return n
}()

// waitPod waits until pod name in the default namespace satisfies ok and
// returns it; what names the wait in the failure.
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

func containerStatus(pod *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == name {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}
