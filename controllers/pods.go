package controllers

import (
	"cmp"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/status"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// podInfo is one Redis pod as the controller sees it.
type podInfo struct {
	Name    string
	Ordinal int
	IP      string
	Ready   bool
	// Up: the pod is not terminating, has an IP and its redis container
	// is running. A node that is up may not be Ready (a replica waits for
	// its master link, which may need the engine's MEET after a restart
	// on new IPs), yet the engine can talk to it.
	Up bool
	// State says why a pod that is not Up does not run, as kubectl would
	// show it: "Terminating", its redis container's waiting reason
	// ("ContainerCreating", ...; with the cause when the kubelet cannot
	// run it, see waitingState), "Pending" (not scheduled), or "not
	// running". "" when Up, except for a pod whose start script refused
	// to start redis-server (handoverRefusedState) and one not ready yet
	// after an OOM kill (oomRestartedState).
	State string
	// Failing: the kubelet cannot run its redis container (podState).
	Failing     bool
	Terminating bool
	// Node is the Kubernetes node the pod is bound to, "" before it is
	// scheduled.
	Node string
	// Zone is Node's topology.kubernetes.io/zone label (placePods), ""
	// when unknown.
	Zone string
	// Hash is the pod's TemplateHashAnnotation.
	Hash    string
	Created time.Time
}

// shardPods is one shard: its StatefulSet (if any) and its pods.
type shardPods struct {
	Index int
	Name  string
	// Desired: the shard is one of spec.shards (not leaving).
	Desired bool
	// Expected is the number of pods the shard should run: spec's
	// 1 + replicasPerShard, or more while its StatefulSet still runs more.
	Expected int
	// DesiredHash is the template hash the shard's pods should carry.
	DesiredHash string
	// TemplateCurrent: the StatefulSet carries DesiredHash and its
	// controller has observed that generation, so a pod deleted now comes
	// back with the new template.
	TemplateCurrent bool
	Pods            []podInfo
}

// groupPods sorts pods into shards. stsByIndex holds the live StatefulSets
// by shard index; desired is spec.shards; leaving are the indices of the
// leaving shards, which are expected to run at least 1 + replicasPerShard
// pods whatever their StatefulSet says (one deleted or scaled down by hand
// is being restored: until then the shard is not ready). Pods of unknown
// shards are ignored (their StatefulSet is gone and they are terminating).
func groupPods(rc string, desired, replicasPerShard int, desiredHash func(int) string,
	stsByIndex map[int]*appsv1.StatefulSet, leaving []int, pods []corev1.Pod) []*shardPods {
	byIndex := map[int]*shardPods{}
	get := func(i int) *shardPods {
		if s, ok := byIndex[i]; ok {
			return s
		}
		s := &shardPods{Index: i, Name: resources.StatefulSetName(rc, i), Desired: i < desired}
		byIndex[i] = s
		return s
	}
	for i := 0; i < desired; i++ {
		s := get(i)
		s.Expected = 1 + replicasPerShard
		s.DesiredHash = desiredHash(i)
	}
	for _, i := range leaving {
		s := get(i)
		s.Expected = 1 + replicasPerShard
		// What a recreated StatefulSet carries; a live one's own below.
		s.DesiredHash = desiredHash(i)
	}
	for i, sts := range stsByIndex {
		s := get(i)
		// A shard runs what its StatefulSet asks for; while a replica
		// scale-down waits (see desiredStatefulSet) that is more than spec.
		s.Expected = max(s.Expected, int(ptrOr(sts.Spec.Replicas, 1)))
		if !s.Desired {
			s.DesiredHash = sts.Spec.Template.Annotations[resources.TemplateHashAnnotation]
		}
		s.TemplateCurrent = sts.Spec.Template.Annotations[resources.TemplateHashAnnotation] == s.DesiredHash &&
			sts.Status.ObservedGeneration >= sts.Generation
	}
	for i := range pods {
		p := &pods[i]
		shard, ordinal, ok := resources.PodOrdinal(rc, p.Name)
		if !ok {
			continue
		}
		s, ok := byIndex[shard]
		if !ok {
			continue
		}
		state, failing := podState(p)
		s.Pods = append(s.Pods, podInfo{
			Name:        p.Name,
			Ordinal:     ordinal,
			IP:          p.Status.PodIP,
			Ready:       podReady(p),
			Up:          podUp(p),
			State:       state,
			Failing:     failing,
			Terminating: p.DeletionTimestamp != nil,
			Node:        p.Spec.NodeName,
			Hash:        p.Annotations[resources.TemplateHashAnnotation],
			Created:     p.CreationTimestamp.Time,
		})
	}
	out := make([]*shardPods, 0, len(byIndex))
	for _, s := range byIndex {
		slices.SortFunc(s.Pods, func(a, b podInfo) int { return a.Ordinal - b.Ordinal })
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *shardPods) int { return a.Index - b.Index })
	return out
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podUp reports whether p's redis container runs on an IP and p is not
// being deleted.
func podUp(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == resources.RedisContainerName {
			return c.State.Running != nil
		}
	}
	return false
}

// handoverRefusedState is the State of a master's pod whose start script
// refused to start redis-server (resources.HandoverRefusedMarker in its
// last termination message) and that is not ready since.
const handoverRefusedState = "redis-server not started: no replica won the election that hands over its slots; " +
	"it retries at each container restart; if a majority of the masters cannot come back, see docs/troubleshooting.md"

// podState says why p does not run (see podInfo.State); "" when it is up.
// A pod whose start script refused to start redis-server says so even while
// its container runs (the script runs the handover again at each restart),
// and so does one not ready yet after an OOM kill (oomRestartedState).
// failing reports a redis container the kubelet cannot run (its waiting
// reason is one of failingReasons or imageReasons); a refused handover is
// a wait the start script chose, not failing.
func podState(p *corev1.Pod) (state string, failing bool) {
	switch {
	case p.DeletionTimestamp != nil:
		return "Terminating", false
	case handoverRefused(p):
		return handoverRefusedState, false
	case podUp(p) && !podReady(p) && lastOOMKill(p) != nil:
		return oomRestartedState, false
	case podUp(p):
		return "", false
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; c.Name == resources.RedisContainerName && w != nil && w.Reason != "" {
			return waitingState(c, specImage(p, c.Name)), failingReasons[w.Reason] || imageReasons[w.Reason]
		}
	}
	if p.Status.Phase == corev1.PodPending || p.Status.Phase == "" {
		return string(corev1.PodPending), false
	}
	return "not running", false
}

// specImage is the image p's spec names for its container name, "" when
// it has none of that name.
func specImage(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// Waiting reasons of a container the kubelet cannot run (as opposed to
// one still starting, ContainerCreating or PodInitializing): it retries
// them with a back-off, but no wait mends them. From the kubelet's
// pkg/kubelet/images (image errors) and pkg/kubelet/container (the rest).
var (
	imageReasons   = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true}
	failingReasons = map[string]bool{"CrashLoopBackOff": true, "CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true}
)

// imageState begins the State of a redis container whose image the
// kubelet cannot pull: one text whichever of ErrImagePull and
// ImagePullBackOff it shows at the moment, so the status does not change
// with each retry.
const imageState = "cannot pull image"

// waitingState is the State of a waiting redis container c: its waiting
// reason, and for a container that cannot run why, in words that stay
// the same from one retry to the next (no back-off duration, no log
// timestamp): "CrashLoopBackOff: exit code 1: Bad directive or wrong
// number of arguments", "cannot pull image registry.invalid/redis:7",
// "CreateContainerConfigError: secret \"x\" not found". image is the
// image the pod's spec names for c, the one the kubelet pulls: c.Image
// is the image of the container that ran last, which the kubelet keeps
// reporting while it fails to pull a new one.
func waitingState(c corev1.ContainerStatus, image string) string {
	w := c.State.Waiting
	switch {
	case imageReasons[w.Reason]:
		return imageState + " " + image
	case w.Reason == "CrashLoopBackOff":
		t := c.LastTerminationState.Terminated
		if t == nil {
			return w.Reason
		}
		why := fmt.Sprintf("exit code %d", t.ExitCode)
		if t.Reason != "" && t.Reason != "Error" && t.Reason != "Completed" {
			why += " (" + t.Reason + ")"
		}
		if line := lastLogLine(t.Message); line != "" {
			why += ": " + line
		}
		return w.Reason + ": " + why
	case failingReasons[w.Reason] && w.Message != "":
		return w.Reason + ": " + clip(firstLine(w.Message), maxStateDetail)
	}
	return w.Reason
}

// redisLogPrefix matches the start of a Redis log line,
// "pid:role dd Mon yyyy hh:mm:ss.mmm level " (redis.io, "Redis
// administration": the log format), which differs between runs.
var redisLogPrefix = regexp.MustCompile(`^\d+:[XCSM] \d{1,2} \w{3} \d{4} [\d:.]+ [.\-*#] `)

// lastLogLine is the last non-empty line of a termination message (the
// tail of the container's log, TerminationMessageFallbackToLogsOnError),
// without Redis's log prefix, clipped to maxStateDetail.
func lastLogLine(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	line := strings.TrimSpace(lines[len(lines)-1])
	return clip(redisLogPrefix.ReplaceAllString(line, ""), maxStateDetail)
}

// maxStateDetail bounds, in bytes, the cause a State quotes from a log or
// a kubelet message.
const maxStateDetail = 160

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// handoverRefused reports whether p's redis container is not ready and last
// ended because its start script refused to start redis-server.
func handoverRefused(p *corev1.Pod) bool {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == resources.RedisContainerName {
			t := c.LastTerminationState.Terminated
			if c.State.Terminated != nil {
				t = c.State.Terminated
			}
			return !c.Ready && t != nil && strings.Contains(t.Message, resources.HandoverRefusedMarker)
		}
	}
	return false
}

// endpoint is the engine's address of a pod, with where it runs and
// whether it is Ready (for the spreading of masters).
func (p podInfo) endpoint() topology.Endpoint {
	return topology.Endpoint{Name: p.Name, Addr: net.JoinHostPort(p.IP, strconv.Itoa(resources.RedisPort)),
		Node: p.Node, Zone: p.Zone, NotReady: !p.Ready}
}

// missingState is the State of an expected pod that does not exist.
const missingState = "missing"

// spec is the shard as the engine wants it: every expected ordinal and
// every other pod it runs, in ordinal order. A pod that is not up, or
// missing, is a Down endpoint (with its IP when it has one): the engine
// does not talk to it, and the steps that need it wait.
func (s *shardPods) spec() topology.ShardSpec {
	out := topology.ShardSpec{Name: s.Name}
	byOrdinal := map[int]podInfo{}
	last := s.Expected - 1
	for _, p := range s.Pods {
		byOrdinal[p.Ordinal] = p
		last = max(last, p.Ordinal)
	}
	for ord := 0; ord <= last; ord++ {
		p, ok := byOrdinal[ord]
		switch {
		case !ok && ord < s.Expected:
			out.Nodes = append(out.Nodes, topology.Endpoint{Name: s.Name + "-" + strconv.Itoa(ord), Down: missingState})
		case !ok:
		case p.Up:
			out.Nodes = append(out.Nodes, p.endpoint())
		case p.IP == "":
			out.Nodes = append(out.Nodes, topology.Endpoint{Name: p.Name, Down: p.State, Node: p.Node, Zone: p.Zone})
		default:
			ep := p.endpoint()
			ep.Down = p.State
			out.Nodes = append(out.Nodes, ep)
		}
	}
	return out
}

// podsSummary counts expected and ready pods over the desired and leaving
// shards and lists the missing or unready ones. An existing pod whose
// redis container the kubelet cannot run (podInfo.Failing) is failing, one
// otherwise not ready and older than status.PodStartGrace is overdue; a
// missing pod is only pending (the StatefulSet controller creates it).
func podsSummary(shards []*shardPods, now time.Time) status.Pods {
	var o status.Pods
	for _, s := range shards {
		o.Expected += s.Expected
		have := map[int]podInfo{}
		for _, p := range s.Pods {
			have[p.Ordinal] = p
			if p.Node != "" {
				o.SetNode(p.Name, p.Node)
			}
		}
		for ord := 0; ord < s.Expected; ord++ {
			p, ok := have[ord]
			switch {
			case ok && p.Ready:
				o.Ready++
			case ok:
				o.NotReady = append(o.NotReady, p.Name)
				o.SetState(p.Name, cmp.Or(p.State, "not ready"))
				switch {
				case p.Failing:
					o.Failing = append(o.Failing, p.Name)
				case now.Sub(p.Created) > status.PodStartGrace:
					o.Overdue = append(o.Overdue, p.Name)
				}
			default:
				name := s.Name + "-" + strconv.Itoa(ord)
				o.NotReady = append(o.NotReady, name)
				o.SetState(name, missingState)
			}
		}
	}
	return o
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
