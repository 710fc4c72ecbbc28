package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/redis-operator/redis-operator/test/localplane/internal/expand"
	"github.com/redis-operator/redis-operator/test/localplane/internal/podnet"
	"github.com/redis-operator/redis-operator/test/localplane/internal/proctree"
)

const (
	// volumeRefresh is how often ConfigMap, Secret, downward API and token
	// files are brought up to date.
	volumeRefresh = 10 * time.Second
	// retryPause is the wait before retrying a container whose volumes,
	// configuration or image cannot be set up yet.
	retryPause = 2 * time.Second
	// Crash-loop back-off as in the kubelet: the first restart is
	// immediate, then 10 s doubling up to 5 min, reset after 10 min of
	// running.
	backoffInitial = 10 * time.Second
	backoffMax     = 5 * time.Minute
	backoffReset   = 10 * time.Minute
	// minGrace is the kubelet's minimum termination grace period.
	minGrace = 2 * time.Second
	// postStartTimeout bounds a postStart hook.
	postStartTimeout = time.Minute
)

// ctr is one container of a pod runtime. Fields below mu are guarded by
// the pod runtime's mutex.
type ctr struct {
	spec    corev1.Container
	init    bool
	sidecar bool // an init container with restartPolicy Always

	proc         *proctree.Process
	execs        *execTracker
	env          *env
	image        *Image
	id           identity
	workDir      string
	state        corev1.ContainerState
	lastState    corev1.ContainerState
	restartCount int32
	ready        bool
	started      bool
	containerID  string
	imageID      string
	specChanged  bool
	completed    bool // a regular init container that exited 0
}

// podRuntime runs one pod's containers.
type podRuntime struct {
	n               *Node
	key             string // namespace/name
	namespace, name string
	uid             types.UID
	dir             string
	vs              *volumeSet

	mu          sync.Mutex
	pod         *corev1.Pod
	ip          string
	netns       *podnet.Pod // the pod's network namespace; nil without one
	startTime   metav1.Time
	initDone    bool
	failed      string // set when an init container failed under restartPolicy Never
	inits       []*ctr
	mains       []*ctr
	volumes     map[string]*volume
	conditions  map[corev1.PodConditionType]corev1.PodCondition
	terminating bool

	stop        chan struct{} // closed when termination starts
	done        chan struct{} // closed when every process is gone
	runDone     chan struct{} // closed when run returns
	supervisors sync.WaitGroup
	predecessor <-chan struct{}
}

func newPodRuntime(n *Node, pod *corev1.Pod, ip string, predecessor <-chan struct{}) *podRuntime {
	dir := filepath.Join(n.stateDir, "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
	pr := &podRuntime{
		n: n, key: pod.Namespace + "/" + pod.Name, namespace: pod.Namespace, name: pod.Name, uid: pod.UID, dir: dir,
		vs:          &volumeSet{n: n, podDir: dir, tokens: map[string]token{}, setUp: map[string]*volume{}},
		pod:         pod.DeepCopy(),
		ip:          ip,
		startTime:   metav1.Now(),
		conditions:  map[corev1.PodConditionType]corev1.PodCondition{},
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		runDone:     make(chan struct{}),
		predecessor: predecessor,
	}
	for _, c := range pod.Spec.InitContainers {
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		pr.inits = append(pr.inits, newCtr(c, true, sidecar))
	}
	for _, c := range pod.Spec.Containers {
		pr.mains = append(pr.mains, newCtr(c, false, false))
	}
	if len(pr.inits) == 0 {
		pr.initDone = true
	}
	return pr
}

func newCtr(spec corev1.Container, init, sidecar bool) *ctr {
	return &ctr{spec: spec, init: init, sidecar: sidecar, execs: newExecTracker(),
		state: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

// stopping reports whether termination has started.
func (pr *podRuntime) stopping() bool {
	select {
	case <-pr.stop:
		return true
	default:
		return false
	}
}

// sleep waits d and reports false if termination started meanwhile.
func (pr *podRuntime) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-pr.stop:
		return false
	case <-t.C:
		return true
	}
}

// run sets the pod up and starts its containers: volumes, then init
// containers one by one, then all containers, each under a supervisor that
// applies the restart policy.
func (pr *podRuntime) run(ctx context.Context) {
	defer close(pr.runDone)
	if pr.predecessor != nil {
		// An earlier pod of the same name is still stopping; like the
		// kubelet, do not run both at once (they may share volumes).
		select {
		case <-pr.predecessor:
		case <-pr.stop:
			return
		}
	}
	lastErr := ""
	for {
		vols, err := pr.vs.sync(ctx, pr.podCopy(), pr.ip)
		if err == nil {
			pr.mu.Lock()
			pr.volumes = vols
			pr.mu.Unlock()
			break
		}
		if err.Error() != lastErr {
			lastErr = err.Error()
			pr.n.event(pr.podCopy(), corev1.EventTypeWarning, "FailedMount", err.Error())
		}
		pr.setAllWaiting("ContainerCreating", err.Error())
		if !pr.sleep(retryPause) {
			return
		}
	}
	go pr.refreshVolumes(ctx)

	for _, c := range pr.inits {
		if c.sidecar {
			pr.supervisors.Add(1)
			go pr.supervise(ctx, c)
			if !pr.waitStarted(c) {
				return
			}
			continue
		}
		if !pr.supervise(ctx, c) {
			return
		}
	}
	pr.mu.Lock()
	pr.initDone = true
	pr.mu.Unlock()
	pr.notify()
	for _, c := range pr.mains {
		pr.supervisors.Add(1)
		go pr.supervise(ctx, c)
	}
}

func (pr *podRuntime) waitStarted(c *ctr) bool {
	for {
		pr.mu.Lock()
		ok := c.started
		pr.mu.Unlock()
		if ok {
			return true
		}
		if !pr.sleep(100 * time.Millisecond) {
			return false
		}
	}
}

func (pr *podRuntime) refreshVolumes(ctx context.Context) {
	for pr.sleep(volumeRefresh) {
		if _, err := pr.vs.sync(ctx, pr.podCopy(), pr.ip); err != nil {
			pr.n.log.Warn("Refreshing volumes failed", "pod", pr.key, "err", err)
		}
	}
}

// supervise runs c again and again as its restart policy says. For a
// regular init container it returns whether the container completed
// (exited 0); it returns false once termination starts.
func (pr *podRuntime) supervise(ctx context.Context, c *ctr) bool {
	if !c.init || c.sidecar {
		defer pr.supervisors.Done()
	}
	var backoff time.Duration
	for {
		if pr.stopping() {
			return false
		}
		began := time.Now()
		code, started := pr.runOnce(ctx, c)
		if pr.stopping() {
			return false
		}
		if !started {
			if !pr.sleep(retryPause) {
				return false
			}
			continue
		}
		pr.mu.Lock()
		specChanged := c.specChanged
		c.specChanged = false
		policy := pr.pod.Spec.RestartPolicy
		pr.mu.Unlock()
		restart := false
		switch {
		case specChanged, c.sidecar:
			restart = true
		case c.init:
			if code == 0 {
				pr.mu.Lock()
				c.completed = true
				pr.mu.Unlock()
				pr.notify()
				return true
			}
			if policy == corev1.RestartPolicyNever {
				pr.mu.Lock()
				pr.failed = fmt.Sprintf("init container %s exited with code %d", c.spec.Name, code)
				pr.mu.Unlock()
				pr.notify()
				return false
			}
			restart = true
		case policy == corev1.RestartPolicyAlways:
			restart = true
		case policy == corev1.RestartPolicyOnFailure:
			restart = code != 0
		}
		if !restart {
			pr.notify()
			return false
		}
		if time.Since(began) > backoffReset {
			backoff = 0
		}
		if backoff > 0 && !specChanged {
			msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, c.spec.Name, pr.name)
			pr.mu.Lock()
			c.lastState = c.state
			c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: msg}}
			pr.mu.Unlock()
			pr.n.event(pr.podCopy(), corev1.EventTypeWarning, "BackOff", "Back-off restarting failed container "+c.spec.Name)
			pr.notify()
			if !pr.sleep(backoff) {
				return false
			}
		}
		backoff = min(max(backoff*2, backoffInitial), backoffMax)
		pr.mu.Lock()
		c.restartCount++
		pr.mu.Unlock()
	}
}

// runOnce starts c and waits for it to exit. started is false when c could
// not be set up (its state then says why and the caller retries).
func (pr *podRuntime) runOnce(ctx context.Context, c *ctr) (code int, started bool) {
	pr.mu.Lock()
	pod := pr.pod.DeepCopy()
	spec := c.spec
	vols := pr.volumes
	restarts := c.restartCount
	pr.mu.Unlock()

	image, err := LookupImage(spec.Image, pr.n.binDir)
	if err == nil {
		err = image.copyBinaries(pr.n.syncImageBinary)
	}
	if err == nil {
		err = image.linkBinaries(ImagesDir(pr.n.stateDir))
	}
	if err != nil {
		pr.setWaiting(c, "ErrImagePull", err.Error(), "Failed")
		return 0, false
	}
	e, err := pr.n.env.containerEnv(pod, &spec, pr.ip)
	if err != nil {
		pr.setWaiting(c, "CreateContainerConfigError", err.Error(), "Failed")
		return 0, false
	}
	e.applyImageEnv(image, &spec)
	mounts, err := containerMounts(&spec, vols, e)
	mounts = append(image.mounts(), mounts...)
	if err == nil && pr.netns != nil {
		var files []mountSpec
		files, err = pr.networkFiles(e.values["HOSTNAME"])
		mounts = append(mounts, files...)
	}
	if err != nil {
		pr.setWaiting(c, "CreateContainerConfigError", err.Error(), "Failed")
		return 0, false
	}
	id, err := containerIdentity(pod, &spec, image.User)
	if err != nil {
		pr.setWaiting(c, "CreateContainerConfigError", err.Error(), "Failed")
		return 0, false
	}
	workDir := spec.WorkingDir
	if workDir == "" {
		workDir = image.WorkingDir
	}
	mapping := e.mapping()
	argv, argvErr := image.Argv(expand.All(spec.Command, mapping), expand.All(spec.Args, mapping))
	logPath := pr.logPath(spec.Name, restarts)
	startedAt := metav1.Now()
	var proc *proctree.Process
	if argvErr == nil {
		pr.n.event(pod, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("Container image %q runs local %s", spec.Image, argv[0]))
		var logFile *os.File
		logFile, err = openLog(logPath)
		if err == nil {
			proc, err = launch(launchSpec{
				runDir:   filepath.Join(pr.dir, "run"),
				name:     spec.Name,
				hostname: e.values["HOSTNAME"],
				workDir:  workDir,
				mounts:   mounts,
				id:       id,
				argv:     argv,
				env:      e.list(),
				log:      logFile,
				netns:    pr.netnsPath(),
			})
			logFile.Close()
		}
	} else {
		err = argvErr
	}
	if err != nil {
		msg := err.Error()
		pr.n.event(pod, corev1.EventTypeWarning, "Failed", "Error: "+msg)
		pr.mu.Lock()
		c.lastState = c.state
		c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 128, Reason: "StartError", Message: msg, StartedAt: startedAt, FinishedAt: metav1.Now()}}
		c.ready, c.started = false, false
		pr.mu.Unlock()
		pr.notify()
		return 128, true
	}

	pr.mu.Lock()
	c.proc, c.env, c.image, c.id, c.workDir = proc, e, image, id, workDir
	c.containerID = fmt.Sprintf("localplane://%s-%s-%d", pr.uid, spec.Name, restarts)
	c.imageID = "localplane://" + argv[0]
	if c.state.Terminated != nil {
		c.lastState = c.state
	}
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: startedAt}}
	c.ready, c.started = false, false
	terminating := pr.terminating
	pr.mu.Unlock()
	if terminating {
		// terminate ran between launch and here and saw no process.
		proc.Stop(minGrace)
	}
	pr.n.event(pod, corev1.EventTypeNormal, "Started", "Started container "+spec.Name)

	runCtx, cancel := context.WithCancel(ctx)
	if spec.Lifecycle != nil && spec.Lifecycle.PostStart != nil {
		if ok, msg := pr.runLifecycle(runCtx, c, spec.Lifecycle.PostStart, postStartTimeout); !ok {
			pr.n.event(pod, corev1.EventTypeWarning, "FailedPostStartHook", msg)
			proc.Stop(pr.grace(pod, nil))
		}
	}
	if spec.StartupProbe == nil {
		pr.mu.Lock()
		c.started = true
		pr.mu.Unlock()
	}
	pr.notify()
	if !c.init || c.sidecar {
		go pr.probe(runCtx, c, spec)
	}
	<-proc.Done()
	cancel()
	c.execs.killAll()
	code = proc.ExitCode()

	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	term := &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, StartedAt: startedAt,
		FinishedAt: metav1.Now(), ContainerID: c.containerID}
	if code != 0 && spec.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		term.Message = tailFile(logPath, 80, 2048)
	}
	pr.mu.Lock()
	c.proc = nil
	c.state = corev1.ContainerState{Terminated: term}
	c.ready, c.started = false, false
	pr.mu.Unlock()
	pr.notify()
	return code, true
}

// probe runs c's startup probe until it succeeds, then its liveness and
// readiness probes, until ctx ends (the container exited).
func (pr *podRuntime) probe(ctx context.Context, c *ctr, spec corev1.Container) {
	if spec.StartupProbe != nil {
		if !pr.probeLoop(ctx, c, spec.StartupProbe, "Startup", func(ok bool) bool {
			if ok {
				pr.mu.Lock()
				c.started = true
				pr.mu.Unlock()
				pr.notify()
			}
			return !ok
		}) {
			return
		}
	}
	if spec.ReadinessProbe == nil {
		pr.mu.Lock()
		c.ready = true
		pr.mu.Unlock()
		pr.notify()
	} else {
		go pr.probeLoop(ctx, c, spec.ReadinessProbe, "Readiness", func(ok bool) bool {
			pr.mu.Lock()
			changed := c.ready != ok
			c.ready = ok
			pr.mu.Unlock()
			if changed {
				pr.notify()
			}
			return true
		})
	}
	if spec.LivenessProbe != nil {
		pr.probeLoop(ctx, c, spec.LivenessProbe, "Liveness", func(bool) bool { return true })
	}
	<-ctx.Done()
}

// probeLoop runs p every period and calls result with the probe's state
// each time it crosses its success or failure threshold; it stops when
// result returns false or ctx ends, returning true when result stopped it.
// A startup or liveness probe that reaches its failure threshold kills the
// container, which is then restarted per the restart policy.
func (pr *podRuntime) probeLoop(ctx context.Context, c *ctr, p *corev1.Probe, kind string, result func(bool) bool) bool {
	if !sleepCtx(ctx, time.Duration(p.InitialDelaySeconds)*time.Second) {
		return false
	}
	successes, failures := 0, 0
	successNeeded := int(max(p.SuccessThreshold, 1))
	failureNeeded := int(max(p.FailureThreshold, 1))
	for {
		ok, msg := pr.runProbeHandler(ctx, c, p.ProbeHandler, seconds(p.TimeoutSeconds, 1))
		if ctx.Err() != nil {
			return false
		}
		if ok {
			successes, failures = successes+1, 0
			if successes >= successNeeded && !result(true) {
				return true
			}
		} else {
			successes, failures = 0, failures+1
			pr.n.event(pr.podCopy(), corev1.EventTypeWarning, "Unhealthy", kind+" probe failed: "+msg)
			if failures >= failureNeeded {
				if kind != "Readiness" {
					pr.n.event(pr.podCopy(), corev1.EventTypeNormal, "Killing",
						fmt.Sprintf("Container %s failed %s probe, will be restarted", pr.containerName(c), strings.ToLower(kind)))
					pr.kill(c, p.TerminationGracePeriodSeconds, true)
					return false
				}
				if !result(false) {
					return true
				}
			}
		}
		if !sleepCtx(ctx, seconds(p.PeriodSeconds, 10)) {
			return false
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// target describes c for running handlers against it.
func (pr *podRuntime) target(c *ctr) (handlerTarget, bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if c.proc == nil {
		return handlerTarget{}, false
	}
	return handlerTarget{podIP: pr.ip, spec: &c.spec, image: c.image, exec: execSpec{
		pid: c.proc.Pid(), netns: pr.netns != nil, workDir: c.workDir, id: c.id, env: c.env.list(), tracker: c.execs,
	}}, true
}

func (pr *podRuntime) runProbeHandler(ctx context.Context, c *ctr, h corev1.ProbeHandler, timeout time.Duration) (bool, string) {
	t, ok := pr.target(c)
	if !ok {
		return false, "container is not running"
	}
	return runHandler(ctx, h, t, timeout)
}

// runLifecycle runs a postStart or preStop handler.
func (pr *podRuntime) runLifecycle(ctx context.Context, c *ctr, h *corev1.LifecycleHandler, timeout time.Duration) (bool, string) {
	if h.Sleep != nil {
		sleepCtx(ctx, min(time.Duration(h.Sleep.Seconds)*time.Second, timeout))
		return true, ""
	}
	return pr.runProbeHandler(ctx, c, corev1.ProbeHandler{Exec: h.Exec, HTTPGet: h.HTTPGet, TCPSocket: h.TCPSocket}, timeout)
}

// grace is the termination grace period: override (a probe's), else the
// pod's deletion grace period, else its terminationGracePeriodSeconds, else
// 30 s; never under the kubelet's 2 s minimum.
func (pr *podRuntime) grace(pod *corev1.Pod, override *int64) time.Duration {
	s := int64(30)
	switch {
	case override != nil:
		s = *override
	case pod.DeletionGracePeriodSeconds != nil:
		s = *pod.DeletionGracePeriodSeconds
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		s = *pod.Spec.TerminationGracePeriodSeconds
	}
	return max(time.Duration(s)*time.Second, minGrace)
}

// kill stops c as the kubelet does: the preStop hook (when hooks is true),
// then SIGTERM, then SIGKILL once the grace period is over. It returns when
// c's processes are gone.
func (pr *podRuntime) kill(c *ctr, override *int64, hooks bool) {
	pr.killWithin(c, pr.grace(pr.podCopy(), override), hooks)
}

func (pr *podRuntime) killWithin(c *ctr, grace time.Duration, hooks bool) {
	pr.mu.Lock()
	proc := c.proc
	spec := c.spec
	pr.mu.Unlock()
	if proc == nil {
		return
	}
	deadline := time.Now().Add(grace)
	if hooks && spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		go func() {
			select {
			case <-proc.Done():
				cancel()
			case <-ctx.Done():
			}
		}()
		if ok, msg := pr.runLifecycle(ctx, c, spec.Lifecycle.PreStop, grace); !ok {
			pr.n.event(pr.podCopy(), corev1.EventTypeWarning, "FailedPreStopHook", msg)
		}
		cancel()
	}
	// The kubelet gives at least 2 s between SIGTERM and SIGKILL, even
	// when preStop used up the grace period.
	proc.Stop(max(time.Until(deadline), minGrace))
}

// update applies a new pod spec from the API: labels and annotations flow
// into downward API files, and a container whose image changed is
// restarted with the new image, as the kubelet does.
func (pr *podRuntime) update(pod *corev1.Pod) {
	pr.mu.Lock()
	pr.pod = pod.DeepCopy()
	var changed []*ctr
	for _, list := range [][]*ctr{pr.inits, pr.mains} {
		for _, c := range list {
			spec := findSpec(pod, c.spec.Name, c.init)
			if spec != nil && spec.Image != c.spec.Image {
				c.spec = *spec
				c.specChanged = true
				changed = append(changed, c)
			}
		}
	}
	pr.mu.Unlock()
	for _, c := range changed {
		pr.n.event(pod, corev1.EventTypeNormal, "Killing", fmt.Sprintf("Container %s definition changed, will be restarted", c.spec.Name))
		go pr.kill(c, nil, true)
	}
	pr.notify()
}

func findSpec(pod *corev1.Pod, name string, init bool) *corev1.Container {
	list := pod.Spec.Containers
	if init {
		list = pod.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// terminate stops every container (main containers first, all at once,
// then sidecars in reverse order) within grace, and waits until all
// processes are gone. Only the first call does the work; later calls wait.
func (pr *podRuntime) terminate(grace time.Duration, hooks bool) {
	pr.mu.Lock()
	if pr.terminating {
		pr.mu.Unlock()
		<-pr.done
		return
	}
	pr.terminating = true
	close(pr.stop)
	pr.mu.Unlock()
	pr.n.event(pr.podCopy(), corev1.EventTypeNormal, "Killing", "Stopping the pod's containers")

	deadline := time.Now().Add(grace)
	var wg sync.WaitGroup
	for _, c := range pr.mains {
		wg.Go(func() { pr.killWithin(c, time.Until(deadline), hooks) })
	}
	wg.Wait()
	for _, c := range slices.Backward(pr.inits) {
		pr.killWithin(c, max(time.Until(deadline), minGrace), hooks)
	}
	<-pr.runDone
	pr.supervisors.Wait()
	close(pr.done)
}

// killNow sends SIGKILL to every running container, cutting a
// termination's grace period short.
func (pr *podRuntime) killNow() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, list := range [][]*ctr{pr.inits, pr.mains} {
		for _, c := range list {
			if c.proc != nil {
				c.proc.Signal(syscall.SIGKILL)
			}
			c.execs.killAll()
		}
	}
}

func (pr *podRuntime) containerName(c *ctr) string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return c.spec.Name
}

func (pr *podRuntime) podCopy() *corev1.Pod {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.pod.DeepCopy()
}

func (pr *podRuntime) setWaiting(c *ctr, reason, msg, event string) {
	pr.mu.Lock()
	changed := c.state.Waiting == nil || c.state.Waiting.Reason != reason || c.state.Waiting.Message != msg
	if c.state.Terminated != nil {
		c.lastState = c.state
	}
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
	c.ready, c.started = false, false
	pr.mu.Unlock()
	if changed {
		pr.n.event(pr.podCopy(), corev1.EventTypeWarning, event, "Error: "+msg)
		pr.notify()
	}
}

func (pr *podRuntime) setAllWaiting(reason, msg string) {
	pr.mu.Lock()
	for _, list := range [][]*ctr{pr.inits, pr.mains} {
		for _, c := range list {
			c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
		}
	}
	pr.mu.Unlock()
	pr.notify()
}

func (pr *podRuntime) notify() { pr.n.notifyPod(pr) }

func (pr *podRuntime) logPath(container string, restart int32) string {
	return filepath.Join(pr.dir, "logs", container, fmt.Sprintf("%d.log", restart))
}

func openLog(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
}

// tailFile returns up to the last lines lines (and maxBytes bytes) of path.
func tailFile(path string, lines, maxBytes int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > maxBytes {
		b = b[len(b)-maxBytes:]
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// containerIdentity merges the pod's and the container's security
// contexts: runAsUser and runAsGroup (container first, then the image's
// USER, imageUser; nil: root), supplementalGroups and fsGroup as
// supplementary groups, and the runAsNonRoot check.
func containerIdentity(pod *corev1.Pod, c *corev1.Container, imageUser *int64) (identity, error) {
	var id identity
	var nonRoot *bool
	if psc := pod.Spec.SecurityContext; psc != nil {
		id.uid, id.gid, nonRoot = psc.RunAsUser, psc.RunAsGroup, psc.RunAsNonRoot
		if psc.FSGroup != nil {
			id.groups = append(id.groups, *psc.FSGroup)
		}
		id.groups = append(id.groups, psc.SupplementalGroups...)
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			id.uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			id.gid = sc.RunAsGroup
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
	}
	if id.uid == nil {
		id.uid = imageUser
	}
	if nonRoot != nil && *nonRoot && (id.uid == nil || *id.uid == 0) {
		return id, fmt.Errorf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", pod.Name, c.Name)
	}
	sort.Slice(id.groups, func(i, j int) bool { return id.groups[i] < id.groups[j] })
	id.groups = slices.Compact(id.groups)
	return id, nil
}
