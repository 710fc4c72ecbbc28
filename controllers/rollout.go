package controllers

import (
	"fmt"
	"slices"
)

// rolloutKind is what the rolling-update planner asks for next.
type rolloutKind string

const (
	// rolloutNone: no pod is stale.
	rolloutNone rolloutKind = ""
	// rolloutWait: a pod is stale but nothing may be done yet.
	rolloutWait rolloutKind = "Wait"
	// rolloutDelete: delete Pod; its StatefulSet recreates it from the
	// new template.
	rolloutDelete rolloutKind = "DeletePod"
	// rolloutFailover: promote replica Pod of Shard (a planned CLUSTER
	// FAILOVER through the engine) so the stale master becomes a replica.
	rolloutFailover rolloutKind = "Failover"
)

// rolloutAction is one step of a rolling update.
type rolloutAction struct {
	Kind   rolloutKind
	Shard  string
	Pod    string
	Reason string
}

// rolloutInput is what the planner knows about the cluster.
type rolloutInput struct {
	Shards []*shardPods
	// Masters maps a shard's name to its master pod ("" when unknown).
	Masters map[string]string
	// InSync holds the replicas whose link to their master is up and not
	// syncing.
	InSync map[string]bool
	// Converged: the engine reported the topology converged this pass
	// (every shard has its replicas in sync, all slots served).
	Converged bool
}

// stalePods lists the pods whose template hash differs from their shard's.
func stalePods(shards []*shardPods) []string {
	var out []string
	for _, s := range shards {
		for _, p := range s.Pods {
			if !p.Terminating && p.Hash != s.DesiredHash {
				out = append(out, p.Name)
			}
		}
	}
	return out
}

// planRollout picks the next step of a rolling update: one shard at a
// time, in shard order, and in a shard the replicas first (highest
// ordinal first), then a planned failover to an up-to-date replica in
// sync, then the old master (by then a replica). A step is taken only
// when the topology converged (each shard has its replicas in sync) and
// the shard's StatefulSet already carries the new template; otherwise the
// planner waits. The one exception is a stale pod that is not ready and
// not the shard's master: it serves nothing, and replacing it may be the
// fix (a broken image rolled back), so it is deleted even before the
// cluster converges. A shard without replicas can only restart its master
// in place: it is deleted last, with a reason saying so.
func planRollout(in rolloutInput) rolloutAction {
	for _, s := range in.Shards {
		var stale []podInfo
		for _, p := range s.Pods {
			if !p.Terminating && p.Hash != s.DesiredHash {
				stale = append(stale, p)
			}
		}
		if len(stale) == 0 {
			continue
		}
		wait := func(format string, a ...any) rolloutAction {
			return rolloutAction{Kind: rolloutWait, Shard: s.Name, Reason: fmt.Sprintf(format, a...)}
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
		// Stale pods that serve nothing go first, converged or not.
		for _, p := range slices.Backward(stale) {
			if !p.Ready && p.Name != master {
				return rolloutAction{Kind: rolloutDelete, Shard: s.Name, Pod: p.Name,
					Reason: fmt.Sprintf("pod %s is not ready and runs an old template", p.Name)}
			}
		}
		if !in.Converged {
			return wait("the cluster is converging; shard %s rolls when every replica is in sync", s.Name)
		}
		if master == "" {
			return wait("shard %s has no known master", s.Name)
		}
		for _, p := range slices.Backward(stale) {
			if p.Name != master {
				return rolloutAction{Kind: rolloutDelete, Shard: s.Name, Pod: p.Name,
					Reason: fmt.Sprintf("replica %s runs an old template", p.Name)}
			}
		}
		// Only the master is stale: hand its slots to an up-to-date replica.
		for _, p := range s.Pods {
			if p.Name != master && p.Ready && in.InSync[p.Name] {
				return rolloutAction{Kind: rolloutFailover, Shard: s.Name, Pod: p.Name,
					Reason: fmt.Sprintf("master %s runs an old template; %s takes over first", master, p.Name)}
			}
		}
		if len(s.Pods) > 1 {
			return wait("no replica of shard %s is in sync to take over from %s", s.Name, master)
		}
		return rolloutAction{Kind: rolloutDelete, Shard: s.Name, Pod: master,
			Reason: fmt.Sprintf("master %s runs an old template and its shard has no replica: it restarts in place", master)}
	}
	return rolloutAction{Kind: rolloutNone}
}
