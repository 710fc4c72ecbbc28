package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// removeReplicaClaims deletes the claims a replica scale-down left: the
// StatefulSets keep claims when scaled down (whenScaled: Retain), so the
// operator deletes the claim of an ordinal at or beyond both spec's
// 1 + replicasPerShard and its StatefulSet's replicas, once that pod is
// gone and the engine converged this pass (so every other node has
// forgotten the removed node, which owned no slot as a replica), or
// settled: nothing left to do but wait for pods that do not run, such as
// the one a scale-down removed. A claim
// an ordinal still wants, or one of a leaving shard (removeLeftShards'),
// is never touched. Not while paused.
func (r *RedisClusterReconciler) removeReplicaClaims(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if s.rc.Spec.Paused || s.result == nil || !(s.result.Converged || s.result.Settled) {
		return ctrl.Result{}, false, nil
	}
	var list corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &list, client.InNamespace(s.rc.Namespace),
		client.MatchingLabels{resources.LabelCluster: s.rc.Name, resources.LabelManagedBy: resources.ManagedBy}); err != nil {
		return ctrl.Result{}, true, fmt.Errorf("listing claims: %w", err)
	}
	var deleted []string
	for i := range list.Items {
		pvc := &list.Items[i]
		shard, ord, ok := claimOrdinal(s.rc.Name, pvc.Name)
		if !ok || pvc.DeletionTimestamp != nil || !s.claimLeftOver(shard, ord) {
			continue
		}
		s.log.Info("Deleting the claim of a removed replica", "claim", pvc.Name)
		if err := r.Client.Delete(ctx, pvc); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, true, fmt.Errorf("deleting claim %s: %w", pvc.Name, err)
		}
		deleted = append(deleted, pvc.Name)
	}
	if len(deleted) > 0 {
		slices.Sort(deleted)
		s.did("ClaimsDeleted", "Deleted the claims of removed replicas: %s", strings.Join(deleted, ", "))
	}
	return ctrl.Result{}, false, nil
}

// claimLeftOver reports whether the claim of a shard's ordinal belongs to
// a replica the shard no longer runs: the shard is desired, its
// StatefulSet and spec both want fewer pods, and the pod is gone.
func (s *scope) claimLeftOver(shard, ord int) bool {
	if shard >= int(s.rc.Spec.Shards) || ord < 1+int(s.rc.Spec.ReplicasPerShard) {
		return false
	}
	sts, ok := s.statefulSets[shard]
	if !ok || ord < int(ptrOr(sts.Spec.Replicas, 1)) {
		return false
	}
	for _, sh := range s.shards {
		if sh.Index != shard {
			continue
		}
		for _, p := range sh.Pods {
			if p.Ordinal == ord {
				return false
			}
		}
	}
	return true
}

// claimOrdinal parses a data claim name (resources.PVCName) into shard and
// ordinal.
func claimOrdinal(rc, name string) (shard, ordinal int, ok bool) {
	pod, found := strings.CutPrefix(name, resources.DataVolumeName+"-")
	if !found {
		return 0, 0, false
	}
	return resources.PodOrdinal(rc, pod)
}

// freshVolumes reports whether no pod of the cluster can hold cluster state
// from an earlier life (topology.Desired.Fresh): it is not restored from a
// backup, and every claim of it was created at or after the RedisCluster
// (a claim an earlier cluster of the same name retained is older). The
// claims come from the cache of the operator's children.
func (r *RedisClusterReconciler) freshVolumes(ctx context.Context, s *scope) (bool, error) {
	if s.rc.Spec.Bootstrap != nil {
		return false, nil
	}
	var list corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &list, client.InNamespace(s.rc.Namespace),
		client.MatchingLabels{resources.LabelCluster: s.rc.Name, resources.LabelManagedBy: resources.ManagedBy}); err != nil {
		return false, fmt.Errorf("listing claims: %w", err)
	}
	for _, pvc := range list.Items {
		if pvc.CreationTimestamp.Before(&s.rc.CreationTimestamp) {
			return false, nil
		}
	}
	return true, nil
}
