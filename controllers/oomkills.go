package controllers

import (
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// oomKilledReason is the kubelet's termination reason of a container the
// kernel killed at its memory limit; the operator's Warning event that
// reports it has the same reason.
const oomKilledReason = "OOMKilled"

// oomKill is the OOM kill a Redis pod's redis container last ended with, as
// the kubelet reports it in the container's lastState.
type oomKill struct {
	pod string
	uid types.UID
	// container is the killed container's ID: each kill has its own.
	container string
	at        time.Time
	// limit is the container's memory limit; zero without one.
	limit resource.Quantity
}

// oomKills lists the pods whose redis container last ended OOM-killed, in
// the order of pods.
func oomKills(pods []corev1.Pod) []oomKill {
	var out []oomKill
	for i := range pods {
		p := &pods[i]
		t := lastOOMKill(p)
		if t == nil {
			continue
		}
		k := oomKill{pod: p.Name, uid: p.UID, container: t.ContainerID, at: t.FinishedAt.Time}
		for _, c := range p.Spec.Containers {
			if c.Name == resources.RedisContainerName {
				k.limit = c.Resources.Limits[corev1.ResourceMemory]
			}
		}
		out = append(out, k)
	}
	return out
}

// lastOOMKill is the last termination of p's redis container when the
// kubelet says it was OOM-killed, nil otherwise.
func lastOOMKill(p *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == resources.RedisContainerName {
			if t := c.LastTerminationState.Terminated; t != nil && t.Reason == oomKilledReason {
				return t
			}
			return nil
		}
	}
	return nil
}

// message is the OOMKilled event's message for k on a cluster whose
// maxmemory is maxmemory ("" or "0" when it has none).
func (k oomKill) message(maxmemory string) string {
	limit := "none"
	if !k.limit.IsZero() {
		limit = k.limit.String()
	}
	if maxmemory == "" || maxmemory == "0" {
		maxmemory = "none"
	}
	return "Pod " + k.pod + "'s redis container was OOM-killed at " + k.at.UTC().Format(time.RFC3339) +
		" (memory limit " + limit + ", maxmemory " + maxmemory + "): raise spec.resources.limits.memory or lower maxmemory " +
		"(the memory Redis uses beyond maxmemory, such as client output buffers, replica buffers and a fork's copy-on-write pages, counts against the limit too)"
}

// oomRestartedState is the State of a pod whose redis container runs
// again after an OOM kill but is not ready yet.
const oomRestartedState = "restarted after its redis container was OOM-killed"

// oomReports remembers, per cluster, the OOM kills already reported, so
// that each kill (one killed container) gives one OOMKilled event, not one
// per pass. Kills that ended before this operator's first pass are not
// reported: a restarted operator does not report again what the one before
// it did (a kill while no operator ran goes unreported). Safe for
// concurrent use; the zero value is empty.
type oomReports struct {
	mu    sync.Mutex
	since time.Time
	// last maps each pod, by UID, to the container whose kill it last
	// reported.
	last map[client.ObjectKey]map[types.UID]string
}

// fresh returns the kills of kills not reported yet for cluster and records
// them as reported; pods not in kills are forgotten (their last
// termination is no OOM kill, or they are gone). now is the pass's time.
func (m *oomReports) fresh(cluster client.ObjectKey, now time.Time, kills []oomKill) []oomKill {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.since.IsZero() {
		// finishedAt has whole seconds.
		m.since = now.Truncate(time.Second)
	}
	if m.last == nil {
		m.last = map[client.ObjectKey]map[types.UID]string{}
	}
	seen := m.last[cluster]
	next := map[types.UID]string{}
	var out []oomKill
	for _, k := range kills {
		next[k.uid] = k.container
		if seen[k.uid] != k.container && !k.at.Before(m.since) {
			out = append(out, k)
		}
	}
	if len(next) == 0 {
		delete(m.last, cluster)
	} else {
		m.last[cluster] = next
	}
	return out
}

func (m *oomReports) forget(cluster client.ObjectKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.last, cluster)
}

// reportOOMKills records a Warning event OOMKilled for each new OOM kill
// of the cluster's redis containers (oomReports), naming the pod, when,
// the memory limit and maxmemory. It is an action event: recorded even
// when the pass's status write fails, since the next pass does not report
// the kill again.
func (r *RedisClusterReconciler) reportOOMKills(s *scope, pods []corev1.Pod) {
	kills := r.ooms.fresh(client.ObjectKeyFromObject(s.rc), s.now, oomKills(pods))
	if len(kills) == 0 {
		return
	}
	maxmemory := resources.EffectiveConfig(s.rc)["maxmemory"]
	slices.SortFunc(kills, func(a, b oomKill) int { return strings.Compare(a.pod, b.pod) })
	for _, k := range kills {
		s.log.Info("Redis container OOM-killed", "pod", k.pod, "finishedAt", k.at, "memoryLimit", k.limit.String(), "maxmemory", maxmemory)
		s.failed("OOMKilled", "%s", k.message(maxmemory))
	}
}
