package node

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The methods in this file implement virtual-kubelet's nodeutil.Provider
// (and node.PodNotifier): the pod controller calls them for pods bound to
// this node.

// CreatePod starts a pod: it gets a free loopback IP, then its volumes and
// containers are set up in the background while its status is reported.
func (n *Node) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	n.mu.Lock()
	if pr, ok := n.pods[key]; ok && pr.uid == pod.UID {
		n.mu.Unlock()
		return nil
	}
	var predecessor <-chan struct{}
	for _, old := range n.dying {
		if old.key == key {
			predecessor = old.done
		}
	}
	n.mu.Unlock()
	ip, netns, err := n.podAddress()
	if err != nil {
		return err
	}
	pr := newPodRuntime(n, pod, ip, predecessor)
	pr.netns = netns
	n.mu.Lock()
	n.pods[key] = pr
	n.mu.Unlock()
	n.log.Info("Starting pod", "pod", key, "podIP", ip)
	go pr.run(n.ctx)
	pr.notify()
	return nil
}

// UpdatePod applies a changed pod spec (see podRuntime.update).
func (n *Node) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	pr := n.current(pod.Namespace+"/"+pod.Name, pod.UID)
	if pr == nil {
		return errdefs.NotFoundf("pod %s/%s is not running here", pod.Namespace, pod.Name)
	}
	pr.update(pod)
	return nil
}

// DeletePod stops a pod in the background, as the kubelet does on
// deletion: preStop hooks, SIGTERM, SIGKILL after the grace period; then it
// reports the final status and deletes the pod object with grace period 0.
func (n *Node) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	n.mu.Lock()
	if _, ok := n.dying[pod.UID]; ok {
		n.mu.Unlock()
		return nil
	}
	pr, ok := n.pods[key]
	if !ok || pr.uid != pod.UID {
		n.mu.Unlock()
		return errdefs.NotFoundf("pod %s is not running here", key)
	}
	delete(n.pods, key)
	n.dying[pod.UID] = pr
	n.mu.Unlock()

	grace := pr.grace(pod, nil)
	n.log.Info("Stopping pod", "pod", key, "grace", grace.String())
	go func() {
		pr.terminate(grace, true)
		n.finish(pr)
	}()
	return nil
}

// finish reports a stopped pod's final status, deletes its object, and
// frees its IP and directory (claim volumes live elsewhere and stay).
func (n *Node) finish(pr *podRuntime) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods := n.client.CoreV1().Pods(pr.namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(ctx, pr.name, metav1.GetOptions{})
		if err != nil || cur.UID != pr.uid {
			return err
		}
		cur.Status = pr.status(cur)
		_, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		n.log.Warn("Reporting final pod status failed", "pod", pr.key, "err", err)
	}
	uid := pr.uid
	err = pods.Delete(ctx, pr.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		n.log.Warn("Deleting pod object failed", "pod", pr.key, "err", err)
	}
	n.releaseAddress(pr)
	if err := os.RemoveAll(pr.dir); err != nil {
		n.log.Warn("Removing pod directory failed", "pod", pr.key, "err", err)
	}
	n.mu.Lock()
	delete(n.dying, pr.uid)
	n.mu.Unlock()
	n.log.Info("Pod stopped", "pod", pr.key)
}

// GetPod returns the running pod of that name, with its current status.
func (n *Node) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	n.mu.Lock()
	pr, ok := n.pods[namespace+"/"+name]
	n.mu.Unlock()
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not running here", namespace, name)
	}
	return n.podWithStatus(pr), nil
}

// GetPodStatus returns the status of the running pod of that name.
func (n *Node) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := n.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns every running pod.
func (n *Node) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	n.mu.Lock()
	prs := make([]*podRuntime, 0, len(n.pods))
	for _, pr := range n.pods {
		prs = append(prs, pr)
	}
	n.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(prs))
	for _, pr := range prs {
		out = append(out, n.podWithStatus(pr))
	}
	return out, nil
}

// NotifyPods registers the callback for pod status changes.
func (n *Node) NotifyPods(ctx context.Context, cb func(*corev1.Pod)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.notifyCb = cb
}

func (n *Node) current(key string, uid types.UID) *podRuntime {
	n.mu.Lock()
	defer n.mu.Unlock()
	if pr, ok := n.pods[key]; ok && pr.uid == uid {
		return pr
	}
	return nil
}

// notifyPod passes a running pod's new status to the pod controller.
// Stopping pods are not reported this way: a newer pod of the same name may
// already exist, and finish reports their final status itself.
func (n *Node) notifyPod(pr *podRuntime) {
	n.mu.Lock()
	cb := n.notifyCb
	isCurrent := n.pods[pr.key] == pr
	n.mu.Unlock()
	if cb != nil && isCurrent {
		cb(n.podWithStatus(pr))
	}
}

// podWithStatus is the pod as this node runs it (the spec it was created
// or last updated with, which the pod controller compares with the API's to
// decide on UpdatePod) with the status this node computes from it and from
// the API's latest copy (for conditions others own).
func (n *Node) podWithStatus(pr *podRuntime) *corev1.Pod {
	pod := pr.podCopy()
	apiPod := pod
	if cur, err := n.podLister.Pods(pr.namespace).Get(pr.name); err == nil && cur.UID == pr.uid {
		apiPod = cur
	}
	pod.Status = pr.status(apiPod)
	return pod
}

// status computes the pod's status as the kubelet would (phase,
// conditions, IPs, container statuses). Conditions owned by others, such
// as readiness gates or DisruptionTarget, are kept from apiPod.
func (pr *podRuntime) status(apiPod *corev1.Pod) corev1.PodStatus {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	st := corev1.PodStatus{
		HostIP:             pr.n.hostIP,
		HostIPs:            []corev1.HostIP{{IP: pr.n.hostIP}},
		PodIP:              pr.ip,
		PodIPs:             []corev1.PodIP{{IP: pr.ip}},
		StartTime:          &pr.startTime,
		QOSClass:           apiPod.Status.QOSClass,
		ObservedGeneration: apiPod.Generation,
	}
	for _, c := range pr.inits {
		st.InitContainerStatuses = append(st.InitContainerStatuses, c.status())
	}
	for _, c := range pr.mains {
		st.ContainerStatuses = append(st.ContainerStatuses, c.status())
	}
	st.Phase = pr.phaseLocked()
	if pr.failed != "" {
		st.Reason, st.Message = "InitContainerFailed", pr.failed
	}

	var unready, uninitialized []string
	for _, c := range pr.mains {
		if !c.ready {
			unready = append(unready, c.spec.Name)
		}
	}
	for _, c := range pr.inits {
		if !c.completed && !(c.sidecar && c.started) {
			uninitialized = append(uninitialized, c.spec.Name)
		}
	}
	set := func(t corev1.PodConditionType, ok bool, reason, msg string) {
		status := corev1.ConditionFalse
		if ok {
			status, reason, msg = corev1.ConditionTrue, "", ""
		}
		old, had := pr.conditions[t]
		cond := corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: apiPod.Generation, LastTransitionTime: old.LastTransitionTime}
		if !had || old.Status != status {
			cond.LastTransitionTime = metav1.Now()
		}
		pr.conditions[t] = cond
	}
	terminal := st.Phase == corev1.PodSucceeded || st.Phase == corev1.PodFailed
	set(corev1.PodReadyToStartContainers, true, "", "")
	set(corev1.PodInitialized, pr.initDone, "ContainersNotInitialized",
		fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(uninitialized, " ")))
	containersReady := len(unready) == 0 && !terminal
	reason, msg := "ContainersNotReady", fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	if terminal {
		reason, msg = "PodCompleted", ""
	}
	set(corev1.ContainersReady, containersReady, reason, msg)
	var gatesPending []string
	for _, g := range apiPod.Spec.ReadinessGates {
		ok := false
		for _, c := range apiPod.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == corev1.ConditionTrue {
				ok = true
			}
		}
		if !ok {
			gatesPending = append(gatesPending, string(g.ConditionType))
		}
	}
	switch {
	case !containersReady:
		set(corev1.PodReady, false, reason, msg)
	case len(gatesPending) > 0:
		set(corev1.PodReady, false, "ReadinessGatesNotReady",
			fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist or is not True", strings.Join(gatesPending, ", ")))
	default:
		set(corev1.PodReady, true, "", "")
	}
	set(corev1.PodScheduled, true, "", "")

	owned := map[corev1.PodConditionType]bool{}
	for t, c := range pr.conditions {
		owned[t] = true
		st.Conditions = append(st.Conditions, c)
	}
	for _, c := range apiPod.Status.Conditions {
		if !owned[c.Type] {
			st.Conditions = append(st.Conditions, c)
		}
	}
	sort.Slice(st.Conditions, func(i, j int) bool { return st.Conditions[i].Type < st.Conditions[j].Type })
	return st
}

// phaseLocked follows the kubelet's getPhase.
func (pr *podRuntime) phaseLocked() corev1.PodPhase {
	if pr.failed != "" {
		return corev1.PodFailed
	}
	if !pr.initDone && !pr.terminating {
		return corev1.PodPending
	}
	running, waiting, succeeded, failed := 0, 0, 0, 0
	for _, c := range pr.mains {
		switch {
		case c.state.Running != nil:
			running++
		case c.state.Terminated != nil && c.state.Terminated.ExitCode == 0:
			succeeded++
		case c.state.Terminated != nil:
			failed++
		case c.restartCount > 0 || c.lastState.Terminated != nil:
			running++ // waiting to restart
		default:
			waiting++
		}
	}
	switch {
	case pr.terminating && running == 0 && waiting == 0:
		if failed > 0 {
			return corev1.PodFailed
		}
		return corev1.PodSucceeded
	case waiting > 0:
		return corev1.PodPending
	case running > 0:
		return corev1.PodRunning
	case pr.pod.Spec.RestartPolicy == corev1.RestartPolicyAlways:
		return corev1.PodRunning
	case failed > 0 && pr.pod.Spec.RestartPolicy == corev1.RestartPolicyNever:
		return corev1.PodFailed
	case failed > 0:
		return corev1.PodRunning
	}
	return corev1.PodSucceeded
}

func (c *ctr) status() corev1.ContainerStatus {
	started := c.started
	return corev1.ContainerStatus{
		Name:                 c.spec.Name,
		State:                *c.state.DeepCopy(),
		LastTerminationState: *c.lastState.DeepCopy(),
		Ready:                c.ready,
		RestartCount:         c.restartCount,
		Image:                c.spec.Image,
		ImageID:              c.imageID,
		ContainerID:          c.containerID,
		Started:              &started,
	}
}

// GetContainerLogs serves `kubectl logs` from the container's log files
// (the current run, or the previous one with Previous).
func (n *Node) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	n.mu.Lock()
	pr, ok := n.pods[namespace+"/"+podName]
	n.mu.Unlock()
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not running here", namespace, podName)
	}
	c := pr.find(containerName)
	if c == nil {
		return nil, errdefs.NotFoundf("pod %s/%s has no container %q", namespace, podName, containerName)
	}
	pr.mu.Lock()
	run := c.restartCount
	pr.mu.Unlock()
	if opts.Previous {
		if run == 0 {
			return nil, errdefs.NotFoundf("previous terminated container %q in pod %q not found", containerName, podName)
		}
		run--
	}
	path := pr.logPath(containerName, run)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, errdefs.NotFoundf("no logs for container %q in pod %q: %v", containerName, podName, err)
	}
	if opts.Tail > 0 {
		lines := strings.SplitAfter(string(b), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		if len(lines) > opts.Tail {
			lines = lines[len(lines)-opts.Tail:]
		}
		b = []byte(strings.Join(lines, ""))
	}
	if opts.LimitBytes > 0 && len(b) > opts.LimitBytes {
		b = b[:opts.LimitBytes]
	}
	if !opts.Follow || opts.Previous {
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	follow := &followReader{ctx: ctx, f: f, live: func() bool {
		pr.mu.Lock()
		defer pr.mu.Unlock()
		return c.restartCount == run && !pr.terminating
	}}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), follow), f}, nil
}

// followReader reads a growing log file until the container run it
// belongs to ends or ctx is done (`kubectl logs -f`).
type followReader struct {
	ctx  context.Context
	f    *os.File
	live func() bool
}

func (r *followReader) Read(p []byte) (int, error) {
	for {
		n, err := r.f.Read(p)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		if !r.live() {
			return 0, io.EOF
		}
		select {
		case <-r.ctx.Done():
			return 0, io.EOF
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RunInContainer serves `kubectl exec`: the command runs in the
// container's namespaces with its environment and user.
func (n *Node) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	n.mu.Lock()
	pr, ok := n.pods[namespace+"/"+podName]
	n.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not running here", namespace, podName)
	}
	c := pr.find(containerName)
	if c == nil {
		return errdefs.NotFoundf("pod %s/%s has no container %q", namespace, podName, containerName)
	}
	t, ok := pr.target(c)
	if !ok || len(cmd) == 0 {
		return errdefs.InvalidInputf("container %q is not running or the command is empty", containerName)
	}
	argv := append([]string(nil), cmd...)
	bin, err := t.image.Resolve(argv[0])
	if err != nil {
		return err
	}
	argv[0] = t.image.containerPath(bin)
	s := t.exec
	s.argv = argv
	s.stdin, s.stdout, s.stderr = attach.Stdin(), attach.Stdout(), attach.Stderr()
	if s.stderr == nil {
		s.stderr = s.stdout
	}
	code, err := execIn(ctx, s)
	if err != nil {
		return err
	}
	if code != 0 {
		return exitError(code)
	}
	return nil
}

// exitError carries a command's exit code back through the exec stream.
type exitError int

func (e exitError) Error() string {
	return fmt.Sprintf("command terminated with non-zero exit code: %d", int(e))
}
func (e exitError) String() string  { return e.Error() }
func (e exitError) Exited() bool    { return true }
func (e exitError) ExitStatus() int { return int(e) }

func (pr *podRuntime) find(name string) *ctr {
	for _, list := range [][]*ctr{pr.mains, pr.inits} {
		for _, c := range list {
			if c.spec.Name == name || (name == "" && !c.init) {
				return c
			}
		}
	}
	return nil
}

// AttachToContainer is not supported: containers have no terminal to attach to.
func (n *Node) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	return errdefs.InvalidInput("attach is not supported on the local plane; use exec")
}

// GetStatsSummary is not supported.
func (n *Node) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return nil, errdefs.InvalidInput("stats are not supported on the local plane")
}

// GetMetricsResource is not supported.
func (n *Node) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) {
	return nil, errdefs.InvalidInput("metrics are not supported on the local plane")
}

// PortForward is not supported: pod IPs are reachable directly.
func (n *Node) PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error {
	return errdefs.InvalidInput("port-forward is not supported on the local plane; pod IPs are reachable from this machine")
}
