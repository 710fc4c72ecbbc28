//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The suite's operator is installed as users install it (issue 16 point
// 3): `redis-operator manifests --overlay dev` applied as it is rendered
// (one replica, debug logging, leader election, webhooks with
// self-managed certificates, the shipped RBAC), its pod running this
// checkout's binary as the operator's image (test/localplane: Images) in
// its own network namespace, as its ServiceAccount. The scenarios stop,
// kill and start it the way a cluster does: the Deployment scaled to 0
// and back, its container's process signalled.

// suiteOverlay is the overlay the suite installs, unchanged.
const suiteOverlay = "dev"

// installSuiteOperator applies the suite's overlay and waits until its
// Deployment is available and both webhooks have a CA bundle.
func installSuiteOperator(t testing.TB) {
	t.Helper()
	if env.installedSince.IsZero() {
		env.installedSince = time.Now()
	}
	install(t, suiteOverlay, 0)
	env.operatorRestarts = operatorRestarts(t)
}

// stopOperator stops the operator for a scenario that works on the cluster
// behind its back: the Deployment is scaled to 0 (the pod gets SIGTERM and
// its termination grace period, as on a drain), and the call returns once
// no operator pod is left. The operator is started again when t ends
// unless startOperator did already, so later scenarios and the cluster's
// deletion find it running. While it is stopped the API server refuses
// writes of RedisClusters (the validating webhook's failurePolicy is Fail).
func stopOperator(t testing.TB) {
	t.Helper()
	checkOperator(t)
	scaleOperator(t, 0)
	operatorDown(t)
	t.Logf("operator stopped")
}

// removeOperator stops the operator and uninstalls it (namespace,
// webhooks, RBAC; the CRD without its conversion webhook), for a scenario
// that installs an operator of its own. startOperator installs the suite's
// again when t ends.
func removeOperator(t testing.TB) {
	t.Helper()
	stopOperator(t)
	env.installedSpans = append(env.installedSpans, [2]time.Time{env.installedSince, time.Now()})
	env.installedSince = time.Time{}
	uninstall(t)
}

// suiteInstalled reports whether at was while the suite's own install was
// in place.
func (s *suite) suiteInstalled(at time.Time) bool {
	if !s.installedSince.IsZero() && !at.Before(s.installedSince) {
		return true
	}
	for _, span := range s.installedSpans {
		if !at.Before(span[0]) && !at.After(span[1]) {
			return true
		}
	}
	return false
}

// killOperator SIGKILLs the operator's process in its pod: no shutdown
// runs, and a reconcile in flight ends wherever it is (between two Redis
// commands of a slot move, say). The Deployment is then scaled to 0: the
// container the node restarts in place at once cannot lead meanwhile (the
// killed process did not release the Lease) and stops with its pod. Like
// stopOperator, it starts the operator again when t ends unless
// startOperator did already. Once no operator pod is left, the Lease the
// killed process held is deleted, so that the next pod leads at once
// rather than after the lease duration (15 s per kill; TestInstalledHA
// covers a takeover after the lease expires).
func killOperator(t testing.TB) {
	t.Helper()
	checkOperator(t)
	pid := suiteOperatorPID(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL to the operator (pid %d): %v", pid, err)
	}
	waitProcessGone(pid, 10*time.Second)
	scaleOperator(t, 0)
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: leaseName}}
	if err := env.k8s.Delete(context.Background(), lease); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting the killed operator's Lease: %v", err)
	}
	operatorDown(t)
}

// terminateOperator sends the operator's process SIGTERM, as the kubelet
// does first, and waits up to grace for it to exit; it then SIGKILLs it, as
// the kubelet does after terminationGracePeriodSeconds. It returns how long
// the process took to exit, whether it did within grace, and its exit
// status as the node recorded it in the pod's container status (nil:
// status 0). Then, like killOperator, the Deployment goes to 0; the
// container the node restarted in place meanwhile gets SIGTERM too, and
// settles whatever it began.
func terminateOperator(t testing.TB, grace time.Duration) (time.Duration, bool, error) {
	t.Helper()
	checkOperator(t)
	pod := suiteOperatorPod(t)
	pid, err := operatorPID(pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to the operator (pid %d): %v", pid, err)
	}
	inTime := waitProcessGone(pid, grace)
	if !inTime {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		waitProcessGone(pid, 10*time.Second)
	}
	took := time.Since(start)
	exit := exitStatus(t, pod.Name, start)
	scaleOperator(t, 0)
	operatorDown(t)
	return took, inTime, exit
}

// exitStatus waits (up to 10 s) for the node to record the termination of
// pod's manager container that finished after since, and returns nil for
// status 0, an error naming the status and reason otherwise.
func exitStatus(t testing.TB, pod string, since time.Time) error {
	t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		p := &corev1.Pod{}
		if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: installNS, Name: pod}, p); err != nil {
			last = err.Error()
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			for _, term := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if term == nil || term.FinishedAt.Time.Before(since.Truncate(time.Second)) {
					continue
				}
				if term.ExitCode == 0 {
					return nil
				}
				return fmt.Errorf("exit status %d (%s)", term.ExitCode, term.Reason)
			}
		}
		last = "no termination recorded yet"
	}
	return fmt.Errorf("the exit of pod %s's container is not in its status: %s", pod, last)
}

// operatorDown records that the operator was stopped on purpose, and
// starts it again when t ends if it is still stopped then.
func operatorDown(t testing.TB) {
	env.operatorStopped = true
	t.Cleanup(func() {
		if env.operatorStopped {
			startOperator(t)
		}
	})
}

// startOperator (re)applies the suite's overlay, which scales the
// Deployment back to its replica and installs whatever a scenario
// uninstalled, and waits until the operator is available and its webhooks
// answer: a scenario may write RedisClusters as soon as it returns.
func startOperator(t testing.TB) {
	t.Helper()
	installSuiteOperator(t)
	env.operatorStopped = false
	t.Logf("operator started")
}

// scaleOperator sets the operator Deployment's replicas to n and, for 0,
// waits until no operator pod is left.
func scaleOperator(t testing.TB, n int32) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := env.k8s.Get(ctx, client.ObjectKey{Namespace: installNS, Name: installDeployment}, d); err != nil {
		t.Fatalf("reading the operator's Deployment: %v", err)
	}
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &n
	if err := env.k8s.Patch(ctx, d, patch, client.FieldOwner("e2e-scale")); err != nil {
		t.Fatalf("scaling the operator's Deployment to %d: %v", n, err)
	}
	if n > 0 {
		return
	}
	waitFor(t, "no operator pod left", 2*time.Minute, func() (bool, string) {
		env.opLogs.flush()
		pods := &corev1.PodList{}
		if err := env.k8s.List(ctx, pods, client.InNamespace(installNS)); err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
}

// suiteOperatorPod is the suite operator's running pod (the Deployment
// has one replica).
func suiteOperatorPod(t testing.TB) corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.k8s.List(context.Background(), pods, client.InNamespace(installNS)); err != nil {
		t.Fatal(err)
	}
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		t.Fatalf("%d running operator pods in %s, want 1", len(running), installNS)
	}
	return running[0]
}

func suiteOperatorPID(t testing.TB) int {
	t.Helper()
	pid, err := operatorPID(suiteOperatorPod(t).Name)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitProcessGone polls until pid no longer exists or timeout passes, and
// reports whether it is gone. The process is the node's child, not this
// one's, so it cannot be waited for.
func waitProcessGone(pid int, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// operatorLostPods lists the operator's pods on node with their restart
// counts (podRestarts), as loseNode records them in env.operatorLost.
func operatorLostPods(t testing.TB, node string) map[types.UID]int32 {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.k8s.List(context.Background(), pods, client.InNamespace(installNS)); err != nil {
		t.Fatal(err)
	}
	out := map[types.UID]int32{}
	for _, p := range pods.Items {
		if p.Spec.NodeName == node {
			out[p.UID] = podRestarts(&p)
		}
	}
	return out
}

// podRestarts sums the restart counts of p's containers.
func podRestarts(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// operatorRestarts sums the restart counts of the operator's containers.
func operatorRestarts(t testing.TB) int32 {
	t.Helper()
	pods := &corev1.PodList{}
	if err := env.k8s.List(context.Background(), pods, client.InNamespace(installNS)); err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, p := range pods.Items {
		n += podRestarts(&p)
	}
	return n
}

// operatorBack reports whether the operator's pods lost with their node
// (env.operatorLost) came back: each is gone or has restarted since and is
// Ready, and the Deployment is available. The Deployment alone would not
// do: it stays available until the node controller marks the lost node
// NotReady, before the container restarts.
func operatorBack(t testing.TB) bool {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := env.k8s.Get(context.Background(), client.ObjectKey{Namespace: installNS, Name: installDeployment}, d); err != nil ||
		d.Status.AvailableReplicas < ptrValue(d.Spec.Replicas) {
		return false
	}
	pods := &corev1.PodList{}
	if err := env.k8s.List(context.Background(), pods, client.InNamespace(installNS)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if at, lost := env.operatorLost[p.UID]; lost && (podRestarts(&p) <= at || !podIsReady(&p)) {
			return false
		}
	}
	return true
}

// checkOperator fails t when the operator's container restarted since the
// suite started it (it crashed, or its liveness probe failed), unless a
// scenario stopped it on purpose, or lost its node (then the count starts
// again once the operator is available). It looks at most every 5 s.
func checkOperator(t testing.TB) {
	t.Helper()
	if env.operatorStopped || time.Since(env.operatorChecked) < 5*time.Second {
		return
	}
	env.operatorChecked = time.Now()
	if env.operatorLost != nil {
		// Its node was lost with it (loseNode): its restart is expected, and
		// counts from the moment it is back.
		if operatorBack(t) {
			env.operatorRestarts, env.operatorLost = operatorRestarts(t), nil
		}
		return
	}
	if n := operatorRestarts(t); n > env.operatorRestarts {
		env.opLogs.flush()
		env.printOperatorLog(os.Stderr, 60)
		t.Fatalf("the operator's container restarted %d times", n-env.operatorRestarts)
	}
}

// logCollector copies the operator pods' container logs (the kubelet keeps
// them under its pod logs directory, podLogGlob, and removes them with the
// pod) into one file that outlives the pods, whole lines only without the
// CRI log format's prefix (criLines), every 250 ms and whenever flush is
// called.
type logCollector struct {
	mu     sync.Mutex
	glob   string
	out    *os.File
	copied map[string]int64 // source path -> bytes copied
	stopCh chan struct{}
	done   chan struct{}
}

func startLogCollector(glob, outPath string) (*logCollector, error) {
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	c := &logCollector{glob: glob, out: out, copied: map[string]int64{}, stopCh: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(c.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-c.stopCh:
				c.flush()
				return
			case <-tick.C:
				c.flush()
			}
		}
	}()
	return c, nil
}

// flush copies what the pods' logs gained since the last copy.
func (c *logCollector) flush() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	files, _ := filepath.Glob(c.glob)
	sort.Strings(files)
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil || int64(len(b)) <= c.copied[p] {
			continue
		}
		b = b[c.copied[p]:]
		end := bytes.LastIndexByte(b, '\n')
		if end < 0 {
			continue
		}
		if _, err := c.out.Write(criLines(b[:end+1])); err == nil {
			c.copied[p] += int64(end + 1)
		}
	}
}

func (c *logCollector) stop() {
	if c == nil {
		return
	}
	close(c.stopCh)
	<-c.done
	_ = c.out.Close()
}
