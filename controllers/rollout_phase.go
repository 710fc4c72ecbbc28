package controllers

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/rollout"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// rolloutShards is what the rolling-update planner needs of the shards.
func rolloutShards(shards []*shardPods) []rollout.Shard {
	out := make([]rollout.Shard, 0, len(shards))
	for _, sh := range shards {
		rs := rollout.Shard{Name: sh.Name, DesiredHash: sh.DesiredHash, TemplateCurrent: sh.TemplateCurrent, Expected: sh.Expected}
		for _, p := range sh.Pods {
			rs.Pods = append(rs.Pods, rollout.Pod{Name: p.Name, Hash: p.Hash, Ready: p.Ready, Terminating: p.Terminating})
		}
		out = append(out, rs)
	}
	return out
}

// replicasInSync are the pods of view that may take over their master's
// slots in a planned failover: replicas whose link to their master is up
// and not syncing, except those that serve an older TLS certificate
// (noSlots, by pod name): clients sent to them would fail their handshake
// until they serve the new one.
func replicasInSync(view *topology.ClusterView, noSlots map[string]string) map[string]bool {
	out := map[string]bool{}
	if view == nil {
		return out
	}
	for _, n := range view.Nodes {
		if n.Reachable() && n.MasterID() != "" && n.Replication.MasterLinkUp && !n.Replication.SyncInProgress &&
			noSlots[n.Endpoint.Name] == "" {
			out[n.Endpoint.Name] = true
		}
	}
	return out
}

// reconcileRollout takes at most one step of a rolling update per pass
// (see rollout.Plan). Nothing happens while paused.
func (r *RedisClusterReconciler) reconcileRollout(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if s.rc.Spec.Paused || !s.passwordKnown {
		return ctrl.Result{}, false, nil
	}
	in := rollout.Input{Shards: rolloutShards(s.shards), Masters: map[string]string{}}
	if s.result != nil {
		in.Converged, in.Settled = s.result.Converged, s.result.Settled
	}
	if t := s.obs.Topology; t != nil {
		for _, sh := range t.Shards {
			in.Masters[sh.Name] = sh.MasterPod
		}
	}
	in.InSync = replicasInSync(s.view, s.noSlots)

	s.rollout = in
	return r.runRolloutAction(ctx, s, rollout.Plan(in))
}

// keptPodsReady reports whether sh has a ready pod at every ordinal below want.
func keptPodsReady(sh *shardPods, want int) bool {
	for ord := range want {
		if !slices.ContainsFunc(sh.Pods, func(p podInfo) bool { return p.Ordinal == ord && p.Ready }) {
			return false
		}
	}
	return true
}

// runRolloutAction carries out one planned step.
func (r *RedisClusterReconciler) runRolloutAction(ctx context.Context, s *scope, action rollout.Action) (ctrl.Result, bool, error) {
	switch action.Kind {
	case rollout.None, rollout.Wait:
		if action.Kind == rollout.Wait {
			s.log.V(1).Info("Rolling update waits", "shard", action.Shard, "reason", action.Reason)
		}
		return ctrl.Result{}, false, nil
	case rollout.DeletePod:
		s.log.Info("Deleting pod for rolling update", "shard", action.Shard, "pod", action.Pod, "reason", action.Reason)
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = s.rc.Namespace, action.Pod
		if err := r.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			s.failed("RollingUpdateFailed", "Deleting pod %s: %v", action.Pod, err)
			return ctrl.Result{}, true, fmt.Errorf("deleting pod %s: %w", action.Pod, err)
		}
		s.did("RollingUpdate", "Restarting pod %s: %s", action.Pod, action.Reason)
	case rollout.Failover:
		s.log.Info("Planned failover", "shard", action.Shard, "pod", action.Pod, "reason", action.Reason)
		fctx, cancel := context.WithTimeout(ctx, failoverTimeout)
		defer cancel()
		if err := r.engine(s, s.password).Failover(fctx, s.desired(), action.Shard, action.Pod); err != nil {
			s.failed("FailoverFailed", "Failover of shard %s to %s: %v", action.Shard, action.Pod, err)
			if isTransient(err) {
				return ctrl.Result{RequeueAfter: busyRequeue}, false, nil
			}
			s.obs.ReconcileErr = fmt.Errorf("failover of shard %s to %s: %w", action.Shard, action.Pod, err)
			return ctrl.Result{}, true, s.obs.ReconcileErr
		}
		s.did("Failover", "Shard %s: %s is master now (%s)", action.Shard, action.Pod, action.Reason)
	}
	s.acted = true
	return ctrl.Result{RequeueAfter: stepRequeue}, false, nil
}

// reconcileReplicaScaleDown lowers the pod count of shards whose
// replicasPerShard went down. The StatefulSet controller removes the
// highest ordinals, so first the master must sit on a pod that stays: when
// it does not, the lowest-ordinal replica in sync takes over (a planned
// failover); the next pass, having seen the new master, shrinks the
// StatefulSet. Only with a topology converged this pass, or settled
// (nothing left to do but wait for pods that do not run) for a shard whose
// kept pods (the ordinals below 1 + replicasPerShard) are all ready: a
// scale-down that removes a pod that cannot run is how a person gets rid of
// it, and must not wait for that pod. Never paused.
func (r *RedisClusterReconciler) reconcileReplicaScaleDown(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if s.rc.Spec.Paused || s.acted || !(s.rollout.Converged || s.rollout.Settled) {
		return ctrl.Result{}, false, nil
	}
	want := 1 + int(s.rc.Spec.ReplicasPerShard)
	for _, sh := range s.shards {
		live := s.statefulSets[sh.Index]
		if !sh.Desired || live == nil || int(ptrOr(live.Spec.Replicas, 1)) <= want {
			continue
		}
		if !s.rollout.Converged && !keptPodsReady(sh, want) {
			s.log.V(1).Info("Replica scale-down waits for the pods it keeps to be ready", "shard", sh.Name)
			continue
		}
		master := s.rollout.Masters[sh.Name]
		_, ord, ok := resources.PodOrdinal(s.rc.Name, master)
		if !ok {
			continue
		}
		if ord >= want {
			for _, p := range sh.Pods {
				if p.Ordinal < want && p.Ready && s.rollout.InSync[p.Name] {
					return r.runRolloutAction(ctx, s, rollout.Action{Kind: rollout.Failover, Shard: sh.Name, Pod: p.Name,
						Reason: fmt.Sprintf("master %s is on a pod the replica scale-down removes", master)})
				}
			}
			s.log.V(1).Info("Replica scale-down waits for a replica in sync to take over", "shard", sh.Name)
			continue
		}
		s.log.Info("Removing replicas", "shard", sh.Name, "from", ptrOr(live.Spec.Replicas, 1), "to", want)
		if _, err := r.apply(ctx, s, r.desiredStatefulSet(s, sh.Index, live, true), &appsv1.StatefulSet{}); err != nil {
			return ctrl.Result{}, true, err
		}
		s.did("ReplicasRemoved", "Shard %s: %d pods to %d; master %s stays", sh.Name, ptrOr(live.Spec.Replicas, 1), want, master)
		s.obs.ReplicasRemoved = append(s.obs.ReplicasRemoved, sh.Name) // not Ready until their nodes are forgotten
		s.acted = true
	}
	return ctrl.Result{}, false, nil
}
