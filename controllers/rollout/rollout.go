// Package rollout plans a rolling update of a Redis Cluster's pods, one step per call: which
// pod to delete (its StatefulSet recreates it from the new template), which replica to
// promote first with a planned failover, or why to wait. It is a pure function of what the
// controller observed; the controller carries the step out.
package rollout

import (
	"fmt"
	"slices"
)

// Kind is what the planner asks for next.
type Kind string

const (
	// None: no pod is stale.
	None Kind = ""
	// Wait: a pod is stale but nothing may be done yet.
	Wait Kind = "Wait"
	// DeletePod: delete Pod; its StatefulSet recreates it from the new template.
	DeletePod Kind = "DeletePod"
	// Failover: promote replica Pod of Shard (a planned CLUSTER FAILOVER through the
	// engine) so the stale master becomes a replica.
	Failover Kind = "Failover"
)

// Action is one step of a rolling update. Reason is a human sentence fragment, set for every
// Kind but None.
type Action struct {
	Kind   Kind
	Shard  string
	Pod    string
	Reason string
}

// Pod is one Redis pod as the planner needs it.
type Pod struct {
	Name string
	// Hash is the pod's template hash (resources.TemplateHashAnnotation).
	Hash        string
	Ready       bool
	Terminating bool
}

// Shard is one shard's StatefulSet and its pods.
type Shard struct {
	// Name is the shard's name, the key of Input.Masters.
	Name string
	// DesiredHash is the template hash the shard's pods should carry.
	DesiredHash string
	// TemplateCurrent: the StatefulSet carries DesiredHash and its controller has observed
	// that generation, so a pod deleted now comes back with the new template.
	TemplateCurrent bool
	// Pods are the shard's pods in ordinal order.
	Pods []Pod
	// Expected is the number of pods the shard should run (1 + replicas
	// per shard); a pod deleted and not yet created again is missing
	// from Pods, not absent from the shard. 0 is taken as len(Pods).
	Expected int
}

// expected is s.Expected, or len(s.Pods) when unset.
func (s Shard) expected() int {
	if s.Expected > 0 {
		return s.Expected
	}
	return len(s.Pods)
}

// Input is what the planner knows about the cluster.
type Input struct {
	Shards []Shard
	// Masters maps a shard's name to its master pod ("" when unknown).
	Masters map[string]string
	// InSync holds the replicas whose link to their master is up and not
	// syncing.
	InSync map[string]bool
	// Converged: the engine reported the topology converged this pass
	// (every shard has its replicas in sync, all slots served).
	Converged bool
	// Settled: the engine reported nothing left to do but wait for pods
	// that do not run (topology.Result.Settled): a shard whose every pod is
	// ready may roll as if converged; one with a pod not ready waits.
	Settled bool
}

// ready reports whether every pod of s exists and is ready.
func (s Shard) ready() bool {
	if len(s.Pods) < s.expected() {
		return false
	}
	for _, p := range s.Pods {
		if !p.Ready {
			return false
		}
	}
	return true
}

// replaceable reports whether a pod of s may be deleted now: the StatefulSet carries the
// new template and no pod of s is terminating.
func (s Shard) replaceable() bool {
	if !s.TemplateCurrent {
		return false
	}
	for _, p := range s.Pods {
		if p.Terminating {
			return false
		}
	}
	return true
}

// stale reports whether p runs another template than its shard's and is not going away.
func (s Shard) stale(p Pod) bool { return !p.Terminating && p.Hash != s.DesiredHash }

// Stale lists the pods, not terminating, whose template hash differs from their shard's, in
// shard then ordinal order.
func Stale(shards []Shard) []string {
	var out []string
	for _, s := range shards {
		for _, p := range s.Pods {
			if s.stale(p) {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// Plan picks the next step of a rolling update: one shard at a
// time, in shard order, and in a shard the replicas first (highest
// ordinal first), then a planned failover to an up-to-date replica in
// sync, then the old master (by then a replica). A step is taken only
// when the topology converged (each shard has its replicas in sync), or
// it is Settled and every pod of the shard is ready (a Settled shard with
// a pod not ready waits and the next shards roll), and the shard's
// StatefulSet already carries the new template; otherwise the planner
// waits. The one exception is a stale pod that is not ready and not its
// shard's master, in any shard: it serves nothing, and replacing it may
// be the fix (a broken image rolled back), so it goes first, even before
// the cluster converges. A shard without replicas can only restart its
// master in place: it is deleted last, with a reason saying so.
func Plan(in Input) Action {
	for _, s := range in.Shards {
		if !s.replaceable() {
			continue
		}
		for _, p := range slices.Backward(s.Pods) {
			if s.stale(p) && !p.Ready && p.Name != in.Masters[s.Name] {
				return Action{Kind: DeletePod, Shard: s.Name, Pod: p.Name,
					Reason: fmt.Sprintf("pod %s is not ready and runs an old template", p.Name)}
			}
		}
	}
	// held: the wait of a shard skipped for a pod of it that is not ready.
	held := Action{Kind: None}
	for _, s := range in.Shards {
		var stale []Pod
		for _, p := range s.Pods {
			if s.stale(p) {
				stale = append(stale, p)
			}
		}
		if len(stale) == 0 {
			continue
		}
		wait := func(format string, a ...any) Action {
			return Action{Kind: Wait, Shard: s.Name, Reason: fmt.Sprintf(format, a...)}
		}
		if !s.TemplateCurrent {
			return wait("StatefulSet %s does not carry the new template yet", s.Name)
		}
		for _, p := range s.Pods {
			if p.Terminating {
				return wait("pod %s is terminating", p.Name)
			}
		}
		master := in.Masters[s.Name]
		if !in.Converged && in.Settled && !s.ready() {
			// Its pod that does not run holds this shard only: the next shards roll.
			if held.Kind == None {
				held = wait("shard %s rolls when every pod of it is ready", s.Name)
			}
			continue
		}
		if !in.Converged && !in.Settled {
			return wait("the cluster is converging; shard %s rolls when every replica is in sync", s.Name)
		}
		if master == "" {
			return wait("shard %s has no known master", s.Name)
		}
		for _, p := range slices.Backward(stale) {
			if p.Name != master {
				return Action{Kind: DeletePod, Shard: s.Name, Pod: p.Name,
					Reason: fmt.Sprintf("replica %s runs an old template", p.Name)}
			}
		}
		// Only the master is stale: hand its slots to an up-to-date replica.
		for _, p := range s.Pods {
			if p.Name != master && p.Ready && in.InSync[p.Name] {
				return Action{Kind: Failover, Shard: s.Name, Pod: p.Name,
					Reason: fmt.Sprintf("master %s runs an old template; %s takes over first", master, p.Name)}
			}
		}
		// A replica that is missing (deleted, not yet created again) is a
		// replica still: never restart the master in place meanwhile.
		if len(s.Pods) > 1 || s.expected() > 1 {
			return wait("no replica of shard %s is in sync to take over from %s", s.Name, master)
		}
		return Action{Kind: DeletePod, Shard: s.Name, Pod: master,
			Reason: fmt.Sprintf("master %s runs an old template and its shard has no replica: it restarts in place", master)}
	}
	return held
}
