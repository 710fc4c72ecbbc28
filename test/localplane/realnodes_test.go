package localplane_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/redis-operator/redis-operator/test/localplane"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
)

// TestRealNodes runs a plane of one node (the kubelet v1.34 with
// containerd 1.6; images from the registry `make images` fills). The node
// is Ready and labelled; a pod runs there, becomes Ready through its
// readiness probe, answers `kubectl exec` and `kubectl logs`, on its pod IP
// and on its host port; a container over its memory limit is OOMKilled; an
// image of another registry is looked for in the plane's registry; losing
// the node kills every container of it and restoring it brings the pod
// back; Stop leaves no kubelet, containerd, shim or container of the plane
// running, no mount, host port rule or bridge.
func TestRealNodes(t *testing.T) {
	p, err := localplane.Start(t.Context(), localplane.Options{StateDir: t.TempDir(), BinDir: binDir(t), Nodes: 1})
	if err != nil {
		t.Fatalf("starting the local plane (needs root, `make tools` and `make images`): %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.Stop()
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	c, ns := p.Client, "default"
	if len(p.Nodes) != 1 || p.Nodes[0] != "localplane-1" {
		t.Fatalf("nodes %v, want [localplane-1]", p.Nodes)
	}
	name := p.Nodes[0]

	n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Status.NodeInfo.ContainerRuntimeVersion; got != "containerd://1.6.20" {
		t.Errorf("node %s runtime %q, want containerd://1.6.20", name, got)
	}
	if got := n.Status.NodeInfo.KubeletVersion; got != "v1.34.2" {
		t.Errorf("node %s kubelet %q, want v1.34.2", name, got)
	}
	if nodeReady(n) != corev1.ConditionTrue || n.Labels["node.kubernetes.io/local-plane"] != "true" ||
		n.Labels[corev1.LabelTopologyZone] != localplane.Zones[0] || n.Labels[corev1.LabelHostname] != name || len(n.Spec.Taints) > 0 {
		t.Errorf("node %s: ready %s, labels %v, taints %v", name, nodeReady(n), n.Labels, n.Spec.Taints)
	}

	// A Redis pod with a marker process whose command line is this test's
	// own, to follow its containers on the machine. Its Redis port is also
	// a host port (portmap), on a port of this test's own, since every
	// node shares the machine's host ports.
	marker := fmt.Sprintf("3600.%09d", rand.IntN(1e9))
	hostPort := int32(20000 + rand.IntN(10000))
	rp := realPod("r", marker)
	rp.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 6379, HostPort: hostPort}}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, rp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := waitPod(ctx, t, c, "r", "Ready", isReady)
	if r.Spec.NodeName != name || !podRange.Contains(net.ParseIP(r.Status.PodIP)) {
		t.Fatalf("pod r on node %q with IP %s, want %s and an IP in %s", r.Spec.NodeName, r.Status.PodIP, name, podnet.NodeCIDRs)
	}
	if ps := processesMentioning(marker); len(ps) != 1 {
		t.Errorf("processes of r's marker container: %v, want one", ps)
	}

	// kubectl exec and logs through the API server and the kubelet.
	kubectl := kubectlFor(t, p)
	for cmd, want := range map[string]string{
		"redis-cli ping": "PONG",
		`echo "$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT"`: "10.96.0.1:443",
	} {
		if out, err := kubectl(ctx, "exec", "r", "-c", "redis", "--", "sh", "-c", cmd); err != nil || !strings.Contains(out, want) {
			t.Errorf("kubectl exec r -- %s: %q, %v; want %q", cmd, out, err, want)
		}
	}
	if out, err := kubectl(ctx, "logs", "r", "-c", "redis"); err != nil || !strings.Contains(out, "Ready to accept connections") {
		t.Errorf("kubectl logs r: %q, %v; want redis-server's start-up lines", out, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(r.Status.PodIP, "6379")})
	t.Cleanup(func() { rdb.Close() })
	if err := rdb.Set(ctx, "from-host", "1", 0).Err(); err != nil {
		t.Errorf("SET on r from the host: %v", err)
	}
	viaHostPort := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(r.Status.HostIP, fmt.Sprint(hostPort))})
	t.Cleanup(func() { viaHostPort.Close() })
	if got, err := viaHostPort.Get(ctx, "from-host").Result(); err != nil || got != "1" {
		t.Errorf("GET on r through host port %s:%d = %q, %v; want 1", r.Status.HostIP, hostPort, got, err)
	}

	// A container over its memory limit is killed by the kernel.
	hog := realPod("hog", "")
	hog.Spec.RestartPolicy = corev1.RestartPolicyNever
	hog.Spec.Containers = []corev1.Container{{
		Name: "hog", Image: "redis:7.0", Command: []string{"tail", "/dev/zero"},
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")}},
	}}
	if _, err := c.CoreV1().Pods(ns).Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitPod(ctx, t, c, "hog", "terminated", func(p *corev1.Pod) bool {
		s := containerStatus(p, "hog")
		return s != nil && s.State.Terminated != nil
	})
	if term := containerStatus(got, "hog").State.Terminated; term.Reason != "OOMKilled" || term.ExitCode != 137 {
		t.Errorf("hog terminated with reason %q, exit code %d; want OOMKilled, 137", term.Reason, term.ExitCode)
	}

	// An image of any other registry is looked for in the plane's registry
	// too (which does not have it), not on the Internet.
	elsewhere := realPod("elsewhere", "")
	elsewhere.Spec.Containers[0].Image = "example.com/nothing:1"
	if _, err := c.CoreV1().Pods(ns).Create(ctx, elsewhere, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got = waitPod(ctx, t, c, "elsewhere", "failing to pull", func(p *corev1.Pod) bool {
		s := containerStatus(p, "redis")
		return s != nil && s.State.Waiting != nil && s.State.Waiting.Reason == "ErrImagePull"
	})
	if msg := containerStatus(got, "redis").State.Waiting.Message; !strings.Contains(msg, "not found") {
		t.Errorf("pulling example.com/nothing:1: %q, want the plane's registry's not found", msg)
	}

	// Losing the node kills every container of it; restored, its pod's
	// containers start again.
	lost := time.Now().Truncate(time.Second)
	if err := p.LoseNode(name); err != nil {
		t.Fatal(err)
	}
	if ps := processesMentioning(marker); len(ps) > 0 {
		t.Errorf("r's marker container still running on the lost node: %v", ps)
	}
	if ps := processesMentioning(filepath.Join(p.StateDir, "nodes")); len(ps) > 0 {
		t.Errorf("processes of the lost node left (kubelet, containerd, shims): %v", ps)
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Error("r still answers on the lost node")
	}
	if err := p.RestoreNode(name); err != nil {
		t.Fatal(err)
	}
	r = waitPod(ctx, t, c, "r", "running again and Ready", func(p *corev1.Pod) bool {
		s := containerStatus(p, "redis")
		return isReady(p) && s != nil && s.State.Running != nil && !s.State.Running.StartedAt.Time.Before(lost)
	})
	again := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(r.Status.PodIP, "6379")})
	t.Cleanup(func() { again.Close() })
	if err := again.Ping(ctx).Err(); err != nil {
		t.Errorf("PING r after the node came back: %v", err)
	}
	if ps := processesMentioning(marker); len(ps) != 1 {
		t.Errorf("processes of r's marker container after the restore: %v, want one", ps)
	}

	// Stop leaves nothing of the real node.
	p.Stop()
	stopped = true
	if ps := processesMentioning(marker); len(ps) > 0 {
		t.Errorf("r's marker container left after Stop: %v", ps)
	}
	if ps := processesMentioning(p.StateDir); len(ps) > 0 {
		t.Errorf("processes of the plane left after Stop (kubelet, containerd, shims): %v", ps)
	}
	if m := mountsUnder(p.StateDir); len(m) > 0 {
		t.Errorf("mounts left after Stop: %v", m)
	}
	// The host port's rules went with the pod's sandbox.
	if out, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").Output(); strings.Contains(string(out), fmt.Sprintf("--dport %d ", hostPort)) {
		t.Errorf("rules for host port %d left after Stop:\n%s", hostPort, out)
	}
	// The node's bridge (its IP) went, and the pods' veths with it.
	if out, err := exec.Command("ip", "-4", "-o", "addr", "show", "to", r.Status.HostIP+"/32").CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("node IP %s still on an interface after Stop: %s %v", r.Status.HostIP, out, err)
	}
}

// TestRealNodeSweep kills a plane of one node (`localplane up`) with
// SIGKILL: its pod's containers outlive it (their shims are not its
// children); the next start in the same state directory kills them and
// starts the pod anew; Stop then leaves nothing.
func TestRealNodeSweep(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "localplane")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/localplane").CombinedOutput(); err != nil {
		t.Fatalf("building cmd/localplane: %v: %s", err, out)
	}
	dir := t.TempDir()
	up := exec.Command(bin, "up", "--state-dir", dir, "--bin-dir", binDir(t), "--nodes", "1")
	up.Stdout, up.Stderr = os.Stderr, os.Stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = up.Process.Kill()
			_ = up.Wait()
			_ = exec.Command(bin, "down", "--state-dir", dir).Run()
		}
	})
	if out, err := exec.Command(bin, "wait", "--state-dir", dir, "--timeout", "5m").CombinedOutput(); err != nil {
		t.Fatalf("localplane wait: %v: %s", err, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	c := clientFor(t, filepath.Join(dir, "kubeconfig"))
	marker := fmt.Sprintf("3600.%09d", rand.IntN(1e9))
	if _, err := c.CoreV1().Pods("default").Create(ctx, realPod("r", marker), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(ctx, t, c, "r", "Ready", isReady)
	before := processesMentioning(marker)
	if len(before) != 1 {
		t.Fatalf("processes of r's marker container: %v, want one", before)
	}

	_ = up.Process.Signal(syscall.SIGKILL)
	_ = up.Wait()
	killed = true
	if ps := processesMentioning(marker); len(ps) != 1 {
		t.Fatalf("r's marker container after the plane was killed: %v, want it still running (its shim outlives the plane)", ps)
	}

	p, err := localplane.Start(t.Context(), localplane.Options{StateDir: dir, BinDir: binDir(t), Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.Stop()
		}
	})
	waitPod(ctx, t, p.Client, "r", "Ready again", func(pod *corev1.Pod) bool {
		return isReady(pod) && len(processesMentioning(marker)) == 1 && processesMentioning(marker)[0] != before[0]
	})
	p.Stop()
	stopped = true
	if ps := processesMentioning(dir); len(ps) > 0 {
		t.Errorf("processes of the plane left after Stop: %v", ps)
	}
	if m := mountsUnder(dir); len(m) > 0 {
		t.Errorf("mounts left after Stop: %v", m)
	}
}

// realPod is a Redis pod, Ready once redis-cli gets PONG. With a marker,
// a second container sleeps for marker seconds, so that its process can be
// found by its command line.
func realPod(name, marker string) *corev1.Pod {
	grace := int64(2)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "real", "role": name}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "redis", Image: "redis:7.0",
				Args: []string{"--protected-mode", "no", "--save", "", "--appendonly", "no"},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "redis-cli ping | grep -q PONG"}}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
	if marker != "" {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: "marker", Image: "redis:7.0", Command: []string{"sleep", marker},
		})
	}
	return pod
}

func isReady(p *corev1.Pod) bool { return conditionStatus(p, corev1.PodReady) == corev1.ConditionTrue }

// kubectlFor returns a function running kubectl (bin/kubectl, else the
// machine's) against p, with its combined output.
func kubectlFor(t *testing.T, p *localplane.Plane) func(ctx context.Context, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(binDir(t), "kubectl")
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("kubectl"); err != nil {
			t.Fatal("no kubectl in bin/ (`make tools`) or on PATH")
		}
	}
	return func(ctx context.Context, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", p.Kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
}

func clientFor(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// TestRestart starts a plane of two nodes, runs a Redis pod with a claim
// on the first and writes a key, stops the plane and starts one of a
// single node in the same state directory: the second node's Node is
// deleted, the pod runs again on the first with the key still in its
// claim's directory.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	first, err := localplane.Start(t.Context(), localplane.Options{StateDir: dir, BinDir: binDir(t), Nodes: 2})
	if err != nil {
		t.Fatalf("starting the local plane (needs root, `make tools` and `make images`): %v", err)
	}
	t.Cleanup(first.Stop)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if _, err := first.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := realPod("r", "")
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: first.Nodes[0]}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	pod.Spec.Containers[0].Args = []string{"--protected-mode", "no", "--appendonly", "yes", "--appendfsync", "always"}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if _, err := first.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := waitPod(ctx, t, first.Client, "r", "Ready", isReady)
	rdb := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(r.Status.PodIP, "6379")})
	err = rdb.Set(ctx, "kept", "across planes", 0).Err()
	rdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	first.Stop()

	restarted := time.Now().Truncate(time.Second)
	p, err := localplane.Start(t.Context(), localplane.Options{StateDir: dir, BinDir: binDir(t), Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	nodes, err := p.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 || nodes.Items[0].Name != "localplane-1" || !slices.Equal(p.Nodes, []string{"localplane-1"}) {
		for _, n := range nodes.Items {
			t.Errorf("node %s", n.Name)
		}
		t.Fatalf("plane nodes %v; want only localplane-1", p.Nodes)
	}
	r = waitPod(ctx, t, p.Client, "r", "running again and Ready", func(pod *corev1.Pod) bool {
		s := containerStatus(pod, "redis")
		return isReady(pod) && s != nil && s.State.Running != nil && !s.State.Running.StartedAt.Time.Before(restarted)
	})
	again := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(r.Status.PodIP, "6379")})
	defer again.Close()
	if got, err := again.Get(ctx, "kept").Result(); err != nil || got != "across planes" {
		t.Errorf("GET kept after the restart = %q, %v; want %q", got, err, "across planes")
	}
}
