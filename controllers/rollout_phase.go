package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// reconcileRollout takes at most one step of a rolling update per pass
// (see planRollout), and before a shard's replica count goes down moves
// its master to a pod that stays. Nothing happens while paused.
func (r *RedisClusterReconciler) reconcileRollout(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if s.rc.Spec.Paused || !s.passwordKnown {
		return ctrl.Result{}, false, nil
	}
	in := rolloutInput{Shards: s.shards, Masters: map[string]string{}, InSync: map[string]bool{}}
	if s.result != nil {
		in.Converged = s.result.Converged
	}
	if t := s.obs.Topology; t != nil {
		for _, sh := range t.Shards {
			in.Masters[sh.Name] = sh.MasterPod
		}
	}
	if s.view != nil {
		for _, n := range s.view.Nodes {
			if n.Reachable() && n.MasterID() != "" && n.Replication.MasterLinkUp && !n.Replication.SyncInProgress {
				in.InSync[n.Endpoint.Name] = true
			}
		}
	}

	action := planRollout(in)
	if action.Kind == rolloutNone && in.Converged {
		action = planScaleDownFailover(s, in)
	}
	switch action.Kind {
	case rolloutNone, rolloutWait:
		if action.Kind == rolloutWait {
			s.log.V(1).Info("Rolling update waits", "shard", action.Shard, "reason", action.Reason)
		}
		return ctrl.Result{}, false, nil
	case rolloutDelete:
		s.log.Info("Deleting pod for rolling update", "shard", action.Shard, "pod", action.Pod, "reason", action.Reason)
		pod := &corev1.Pod{}
		pod.Namespace, pod.Name = s.rc.Namespace, action.Pod
		if err := r.Client.Delete(ctx, pod); err != nil && !apierrors.IsNotFound(err) {
			s.warning("RollingUpdateFailed", "Deleting pod %s: %v", action.Pod, err)
			return ctrl.Result{}, true, fmt.Errorf("deleting pod %s: %w", action.Pod, err)
		}
		s.normal("RollingUpdate", "Restarting pod %s: %s", action.Pod, action.Reason)
	case rolloutFailover:
		s.log.Info("Planned failover", "shard", action.Shard, "pod", action.Pod, "reason", action.Reason)
		fctx, cancel := context.WithTimeout(ctx, r.TopologyTimeout)
		defer cancel()
		if err := r.engine(s.password, s.log).Failover(fctx, s.desired(), action.Shard, action.Pod); err != nil {
			s.warning("FailoverFailed", "Failover of shard %s to %s: %v", action.Shard, action.Pod, err)
			if isTransient(err) {
				return ctrl.Result{RequeueAfter: busyRequeue}, false, nil
			}
			s.obs.ReconcileErr = fmt.Errorf("failover of shard %s to %s: %w", action.Shard, action.Pod, err)
			return ctrl.Result{}, true, s.obs.ReconcileErr
		}
		s.normal("Failover", "Shard %s: %s is master now (%s)", action.Shard, action.Pod, action.Reason)
	}
	s.acted = true
	return ctrl.Result{RequeueAfter: stepRequeue}, false, nil
}

// planScaleDownFailover: when a shard's StatefulSet still runs more pods
// than spec (children held the scale-down back) and its master is one of
// the pods the scale-down removes, promote the lowest-ordinal replica in
// sync first.
func planScaleDownFailover(s *scope, in rolloutInput) rolloutAction {
	want := 1 + int(s.rc.Spec.ReplicasPerShard)
	for _, sh := range s.shards {
		if !sh.Desired {
			continue
		}
		master := in.Masters[sh.Name]
		_, ord, ok := resources.PodOrdinal(s.rc.Name, master)
		if !ok || ord < want {
			continue
		}
		for _, p := range sh.Pods {
			if p.Ordinal < want && p.Ready && in.InSync[p.Name] {
				return rolloutAction{Kind: rolloutFailover, Shard: sh.Name, Pod: p.Name,
					Reason: fmt.Sprintf("master %s is on a pod the replica scale-down removes", master)}
			}
		}
		return rolloutAction{Kind: rolloutWait, Shard: sh.Name, Reason: "no replica in sync below the new replica count"}
	}
	return rolloutAction{Kind: rolloutNone}
}
