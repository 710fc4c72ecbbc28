//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// limitsImage is the server the limits scenarios run: what they show is
// the kubelet's and the kernel's, not a version's.
const limitsImage = "redis:7.0.15"

// TestRealPodsLimits (label realpods): what only real pods show, on the
// real nodes under WAIT-acknowledged writes, none of which is lost. A
// master's redis-server goes past its container's memory limit (a client
// that never reads its replies: its output buffer, which maxmemory does
// not bound) and the kernel kills it: the kubelet restarts it (OOMKilled),
// its replica takes over, and the operator names the kill in an event. A
// hung replica (SIGSTOP, its accept queue full) fails its liveness probe
// and the kubelet restarts it. And pods held to 100m of CPU form and
// scale out, moving keys.
func TestRealPodsLimits(t *testing.T) {
	tier(t, tierCI)
	sideBySide(t) // see doc.go; its scenarios take a place of the group each

	t.Run("master-oom-killed", func(t *testing.T) {
		t.Parallel()
		scenario(t, "realpods-limits/master-oom-killed")
		// Small enough to fill in a second; large enough that the
		// probes' processes (each exec probe runs runc's init and a shell
		// in the container's memory cgroup) leave redis-server room on a
		// loaded machine.
		limit := resource.MustParse("256Mi")
		c := newCluster(t, "real-oom", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Image = limitsImage
			rc.Spec.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: limit},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: limit},
			}
		})
		rc := c.waitReady(5 * time.Minute)
		c.checkConverged(rc)
		maxmemory := strconv.FormatInt(resources.SafeMaxmemory(limit), 10)
		c.checkConfigEverywhere("maxmemory", maxmemory)

		w := startWriter(t, c.clusterClient(), "oom", writerOptions{Wait: true})
		w.waitWrites(200, time.Minute)
		const shard = 0
		master, replica := masterOf(rc, shard), rc.Status.Shards[shard].ReplicaPods[0]
		before := redisContainer(t, c.pod(master))
		start := time.Now()
		floodReplies(t, c.pod(master).Status.PodIP, c.password())

		var killed corev1.ContainerStatus
		c.poll("restarted after an OOM kill", 3*time.Minute, func() (bool, string) {
			killed = redisContainer(t, c.pod(master))
			last := killed.LastTerminationState.Terminated
			if killed.RestartCount > before.RestartCount && last != nil && last.Reason == "OOMKilled" {
				return true, ""
			}
			return false, fmt.Sprintf("%s: restarts %d, last state %+v", master, killed.RestartCount, killed.LastTerminationState)
		})
		t.Logf("%s: redis container OOM-killed at %s (exit code %d), restarts %d → %d", master,
			killed.LastTerminationState.Terminated.FinishedAt.Format(time.TimeOnly), killed.LastTerminationState.Terminated.ExitCode,
			before.RestartCount, killed.RestartCount)

		rc = c.waitReadyAfter(start, 5*time.Minute)
		w.waitWrites(200, time.Minute)
		r := w.verify(c.clusterClient())
		ids := c.checkConverged(rc)
		c.checkStatusShards(rc, ids)
		// The restarted master did not serve empty: its start script handed
		// its slots to the replica (or Redis had elected it), so the
		// replica is the master now and the restarted node replicates it
		// with the shard's keys.
		if got := masterOf(rc, shard); got != replica {
			t.Errorf("shard %d: master is %s, want its former replica %s", shard, got, replica)
		}
		pw := c.password()
		ctx, cancel := redisCtx()
		back, err := role(ctx, c.nodeClient(c.pod(master).Status.PodIP, pw))
		cancel()
		if back != "slave" {
			t.Errorf("%s came back with role %q (%v), want a replica", master, back, err)
		}
		c.poll("the restarted node holding the shard's keys", time.Minute, func() (bool, string) {
			ctx, cancel := redisCtx()
			defer cancel()
			n, err := c.nodeClient(c.pod(master).Status.PodIP, pw).DBSize(ctx).Result()
			m, err2 := c.nodeClient(c.pod(replica).Status.PodIP, pw).DBSize(ctx).Result()
			return err == nil && err2 == nil && n > 0 && n == m, fmt.Sprintf("%s DBSIZE %d (%v), %s DBSIZE %d (%v)", master, n, err, replica, m, err2)
		})

		// The operator names the kill, once.
		var oom []corev1.Event
		c.poll("an OOMKilled event", time.Minute, func() (bool, string) {
			oom = oom[:0]
			for _, e := range c.events() {
				if e.Reason == "OOMKilled" {
					oom = append(oom, e)
				}
			}
			return len(oom) > 0, "no OOMKilled event on the RedisCluster"
		})
		want := fmt.Sprintf("Pod %s's redis container was OOM-killed at %s (memory limit %s, maxmemory %s): raise spec.resources.limits.memory or lower maxmemory",
			master, killed.LastTerminationState.Terminated.FinishedAt.UTC().Format(time.RFC3339), limit.String(), maxmemory)
		if len(oom) != 1 || eventCount(oom[0]) != 1 || oom[0].Type != corev1.EventTypeWarning || !strings.HasPrefix(oom[0].Message, want) {
			for _, e := range oom {
				t.Logf("event %s %s (count %d): %s", e.Type, e.Reason, eventCount(e), e.Message)
			}
			t.Errorf("OOMKilled events: %d, want one Warning, once, starting %q", len(oom), want)
		}
		t.Logf("%s", r)
	})

	t.Run("replica-liveness-restart", func(t *testing.T) {
		t.Parallel()
		scenario(t, "realpods-limits/replica-liveness-restart")
		c := newCluster(t, "real-liveness", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Image = limitsImage
		})
		rc := c.waitReady(5 * time.Minute)
		c.checkConverged(rc)
		w := startWriter(t, c.clusterClient(), "liveness", writerOptions{Wait: true})
		w.waitWrites(200, time.Minute)

		const shard = 1
		replica := rc.Status.Shards[shard].ReplicaPods[0]
		p := c.pod(replica)
		before := redisContainer(t, p)
		start := time.Now()
		// A hung server: it still holds its listening socket, so the
		// kernel completes handshakes for it until its accept queue is
		// full; from then on a connection attempt, the kubelet's TCP
		// probe's included, times out.
		signalRedis(t, p.Status.PodIP, syscall.SIGSTOP)
		conns := fillAcceptQueue(t, p.Status.PodIP)
		c.poll("restarted by the kubelet", 5*time.Minute, func() (bool, string) {
			now := redisContainer(t, c.pod(replica))
			return now.RestartCount > before.RestartCount, fmt.Sprintf("%s: restarts %d, state %+v", replica, now.RestartCount, now.State)
		})
		for _, conn := range conns {
			_ = conn.Close()
		}
		// The kubelet says why: the liveness probe.
		killing := ""
		for _, e := range podEvents(t, c.ns, replica) {
			if e.Reason == "Killing" && strings.Contains(e.Message, "failed liveness probe") {
				killing = e.Message
			}
		}
		if killing == "" {
			t.Errorf("no Killing event for a failed liveness probe on pod %s", replica)
		}

		rc = c.waitReadyAfter(start, 5*time.Minute)
		w.waitWrites(200, time.Minute)
		r := w.verify(c.clusterClient())
		ids := c.checkConverged(rc)
		c.checkStatusShards(rc, ids)
		ctx, cancel := redisCtx()
		back, err := role(ctx, c.nodeClient(c.pod(replica).Status.PodIP, c.password()))
		cancel()
		if back != "slave" {
			t.Errorf("%s came back with role %q (%v), want a replica", replica, back, err)
		}
		t.Logf("kubelet: %s; %s", killing, r)
	})

	t.Run("cpu-throttled", func(t *testing.T) {
		t.Parallel()
		scenario(t, "realpods-limits/cpu-throttled")
		c := newCluster(t, "real-cpu", func(rc *cachev1beta1.RedisCluster) {
			rc.Spec.Image = limitsImage
			rc.Spec.Resources = corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			}
		})
		rc := c.waitReady(5 * time.Minute)
		c.checkConverged(rc)
		w := startWriter(t, c.clusterClient(), "cpu", writerOptions{Wait: true})
		w.waitWrites(200, time.Minute)
		c.scaleTo(4, w)
		r := w.verify(c.clusterClient())
		// Every redis-server ran under the kernel's quota of 100m.
		throttled := 0
		for _, p := range c.pods() {
			quota, periods := cpuQuota(t, p.Status.PodIP)
			if quota != 10000 {
				t.Errorf("pod %s: cpu.cfs_quota_us %d, want 10000 (100m of a 100000 µs period)", p.Name, quota)
			}
			throttled += periods
		}
		t.Logf("%d periods throttled over the cluster's containers; %s", throttled, r)
	})
}

// redisContainer is the status of p's redis container.
func redisContainer(t testing.TB, p *corev1.Pod) corev1.ContainerStatus {
	t.Helper()
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == resources.RedisContainerName {
			return cs
		}
	}
	t.Fatalf("pod %s has no %s container status", p.Name, resources.RedisContainerName)
	return corev1.ContainerStatus{}
}

// floodReplies sends the redis-server at ip ECHO commands of 1 MiB over
// one connection that never reads a reply, until the connection breaks
// (the server died) or 4 GiB went: the replies pile up in the client's
// output buffer, which a normal client's default limit (0) leaves
// unbounded and maxmemory does not stop (ECHO writes nothing).
func floodReplies(t testing.TB, ip, password string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr(ip), 5*time.Second)
	if err != nil {
		t.Fatalf("dialling %s: %v", ip, err)
	}
	defer conn.Close()
	if password != "" {
		if _, err := fmt.Fprintf(conn, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password); err != nil {
			t.Fatalf("AUTH on %s: %v", ip, err)
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || line != "+OK\r\n" {
			t.Fatalf("AUTH on %s: %q %v", ip, line, err)
		}
	}
	const size = 1 << 20
	cmd := []byte(fmt.Sprintf("*2\r\n$4\r\nECHO\r\n$%d\r\n", size))
	cmd = append(cmd, []byte(strings.Repeat("x", size))...)
	cmd = append(cmd, "\r\n"...)
	sent := 0
	for ; sent < 4<<10; sent++ {
		_ = conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := conn.Write(cmd); err != nil {
			t.Logf("flooding %s: the connection broke after %d MiB of ECHO: %v", ip, sent, err)
			return
		}
	}
	t.Logf("flooding %s: sent %d MiB of ECHO, the connection still up", ip, sent)
}

// fillAcceptQueue opens connections to the stopped redis-server at ip
// until three in a row are not accepted within 2 s (its listen queue is
// full: the kernel drops further SYNs) and returns them; the caller closes
// them.
func fillAcceptQueue(t testing.TB, ip string) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for dropped := 0; len(conns) < 20000; {
		conn, err := net.DialTimeout("tcp", addr(ip), 2*time.Second)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("connecting to the stopped server at %s: %v", ip, err)
			}
			if dropped++; dropped == 3 {
				t.Logf("%s: accept queue full after %d connections", ip, len(conns))
				return conns
			}
			continue
		}
		dropped = 0
		conns = append(conns, conn)
	}
	t.Fatalf("%s accepted %d connections while stopped", ip, len(conns))
	return nil
}

// podEvents lists the events recorded on pod name.
func podEvents(t testing.TB, ns, name string) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := env.k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatalf("listing events: %v", err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Pod" && e.InvolvedObject.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// cpuQuota reads the CFS quota (µs per period) of the cpu cgroup of the
// redis-server at ip, and how many periods it was throttled in, from the
// host's cgroup v1 cpu hierarchy.
func cpuQuota(t testing.TB, ip string) (quota, throttled int) {
	t.Helper()
	pid, err := redisPID(ip)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	dir := ""
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-ID:controller-list:path
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 {
			for _, ctl := range strings.Split(parts[1], ",") {
				if ctl == "cpu" {
					dir = filepath.Join("/sys/fs/cgroup", parts[1], parts[2])
				}
			}
		}
	}
	if dir == "" {
		t.Fatalf("redis-server %d (%s): no cpu cgroup in %q", pid, ip, b)
	}
	q, err := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		t.Fatal(err)
	}
	if quota, err = strconv.Atoi(strings.TrimSpace(string(q))); err != nil {
		t.Fatalf("%s/cpu.cfs_quota_us: %v", dir, err)
	}
	stat, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(line, "nr_throttled "); ok {
			throttled, _ = strconv.Atoi(v)
		}
	}
	return quota, throttled
}
