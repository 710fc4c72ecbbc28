package controllers

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
)

// Leaving shards are the shards a scale-in removes. Until the engine
// reports one removable (it owns no slot, holds no key, and every other
// node has forgotten it) its claims may hold the only copy of keys, so it
// is remembered in status.leavingShards and kept running: its StatefulSet
// is recreated when deleted (same name, so the claims come back) and
// scaled back up when scaled down by hand. Only removeLeftShards deletes
// its StatefulSet, PodDisruptionBudget and claims.

// rememberLeaving fills s.leaving with the indices of the leaving shards:
// those of status.leavingShards, of live StatefulSets and of shards in
// status.shards (the last observation, which may predate the scale-in)
// at or beyond spec.shards. One without a StatefulSet stays only while a
// claim of it is left (not being deleted): then its data may be there.
// Without either there is nothing to keep (it was removed, or its data is
// gone and the engine reports its slots lost). The claims are read from
// the API server, not the cache: a cache that has not yet seen a claim's
// deletion would have the shard recreated, and a recreated StatefulSet
// keeps it leaving. Sorted.
func (r *RedisClusterReconciler) rememberLeaving(ctx context.Context, s *scope) error {
	desired := int(s.rc.Spec.Shards)
	set := map[int]bool{}
	add := func(name string) {
		if idx, ok := resources.ShardIndex(s.rc.Name, name); ok && idx >= desired {
			set[idx] = true
		}
	}
	for _, name := range s.original.Status.LeavingShards {
		add(name)
	}
	for _, sh := range s.original.Status.Shards {
		if sh.MasterNodeID != "" {
			add(sh.Name)
		}
	}
	for idx := range s.statefulSets {
		if idx >= desired {
			set[idx] = true
		}
	}
	missing := false
	for idx := range set {
		if _, live := s.statefulSets[idx]; !live {
			missing = true
		}
	}
	claims := map[int]bool{}
	if missing {
		var list corev1.PersistentVolumeClaimList
		if err := r.reader().List(ctx, &list, client.InNamespace(s.rc.Namespace), managedBy(s.rc)); err != nil {
			return fmt.Errorf("listing claims: %w", err)
		}
		for _, pvc := range list.Items {
			if shard, _, ok := claimOrdinal(s.rc.Name, pvc.Name); ok && pvc.DeletionTimestamp == nil {
				claims[shard] = true
			}
		}
	}
	s.leaving = nil
	for idx := range set {
		if _, live := s.statefulSets[idx]; live || claims[idx] {
			s.leaving = append(s.leaving, idx)
		}
	}
	slices.Sort(s.leaving)
	return nil
}

// keepLeavingShards recreates the StatefulSet (and PDB) of each leaving
// shard that lost it, and scales back up one scaled below
// 1 + spec.replicasPerShard pods. Not while paused.
func (r *RedisClusterReconciler) keepLeavingShards(ctx context.Context, s *scope) error {
	if s.rc.Spec.Paused {
		return nil
	}
	want := 1 + s.rc.Spec.ReplicasPerShard
	for _, idx := range s.leaving {
		if _, err := r.apply(ctx, s, resources.PodDisruptionBudget(s.rc, idx), &policyv1.PodDisruptionBudget{}); err != nil {
			return err
		}
		live := s.statefulSets[idx]
		name := resources.StatefulSetName(s.rc.Name, idx)
		switch {
		case live == nil:
			s.log.Info("Recreating the StatefulSet of a leaving shard", "shard", name)
			if _, err := r.apply(ctx, s, resources.StatefulSet(s.rc, idx, s.placement[idx]), &appsv1.StatefulSet{}); err != nil {
				return err
			}
			s.failed("ShardRecreated", "Recreated StatefulSet %s: the shard is leaving but not drained, its claims may hold keys", name)
		case ptrOr(live.Spec.Replicas, 1) < want:
			s.log.Info("Scaling a leaving shard back up", "shard", name, "from", ptrOr(live.Spec.Replicas, 1), "to", want)
			base := live.DeepCopy()
			live.Spec.Replicas = &want
			if err := r.Client.Patch(ctx, live, client.MergeFrom(base), client.FieldOwner(FieldOwner)); err != nil {
				return fmt.Errorf("scaling StatefulSet %s: %w", name, err)
			}
			s.failed("ShardRecreated", "Scaled StatefulSet %s back to %d pods: the shard is leaving but not drained", name, want)
		}
	}
	return nil
}

// leftShard drops a removed shard from the leaving shards.
func (s *scope) leftShard(idx int) {
	s.leaving = slices.DeleteFunc(s.leaving, func(i int) bool { return i == idx })
}

// removeLeftShards deletes the StatefulSet, PDB and claims of every
// leaving shard the engine reports removable (it owns no slot, holds no
// key, and every other node has forgotten it, so its data is elsewhere)
// and whose pods this pass observed, and forgets it as leaving. These are
// the only claims the operator deletes outside the cluster's deletion.
func (r *RedisClusterReconciler) removeLeftShards(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if s.result == nil || s.rc.Spec.Paused {
		return ctrl.Result{}, false, nil
	}
	for _, name := range s.result.Removable {
		idx, ok := resources.ShardIndex(s.rc.Name, name)
		if !ok || idx < int(s.rc.Spec.Shards) {
			continue
		}
		sts, ok := s.statefulSets[idx]
		if !ok || !s.observedPodsOf(name) {
			continue
		}
		s.log.Info("Removing drained shard", "shard", name)
		if err := r.Client.Delete(ctx, sts, client.PropagationPolicy("Background")); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, true, fmt.Errorf("deleting StatefulSet %s: %w", name, err)
		}
		pdb := &policyv1.PodDisruptionBudget{}
		pdb.Namespace, pdb.Name = s.rc.Namespace, resources.PDBName(s.rc.Name, idx)
		if err := r.Client.Delete(ctx, pdb); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, true, fmt.Errorf("deleting PodDisruptionBudget %s: %w", pdb.Name, err)
		}
		if err := r.deleteClaims(ctx, s.rc, map[string]string{resources.LabelShard: fmt.Sprint(idx)}); err != nil {
			return ctrl.Result{}, true, err
		}
		delete(s.statefulSets, idx)
		s.leftShard(idx)
		s.obs.Leaving = slices.DeleteFunc(s.obs.Leaving, func(n string) bool { return n == name })
		s.obs.Removed = append(s.obs.Removed, name)
		s.acted = true
		s.did("ShardRemoved", "Shard %s owns no slots and was forgotten by the cluster: deleted its StatefulSet and claims", name)
	}
	return ctrl.Result{}, false, nil
}

// managedBy selects what the operator made for rc, or what its
// StatefulSets made from templates it wrote: StatefulSets, pods and claims
// carry both labels (resources.ClusterLabels).
func managedBy(rc *cachev1beta1.RedisCluster) client.MatchingLabels {
	return client.MatchingLabels{resources.LabelCluster: rc.Name, resources.LabelManagedBy: resources.ManagedBy}
}

// deleteClaims deletes the cluster's PVCs that also match extra labels.
// Claims still mounted are only marked: Kubernetes' PVC protection removes
// them when their pod is gone.
func (r *RedisClusterReconciler) deleteClaims(ctx context.Context, rc *cachev1beta1.RedisCluster, extra map[string]string) error {
	sel := managedBy(rc)
	for k, v := range extra {
		sel[k] = v
	}
	var list corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &list, client.InNamespace(rc.Namespace), sel); err != nil {
		return fmt.Errorf("listing claims: %w", err)
	}
	for i := range list.Items {
		pvc := &list.Items[i]
		if pvc.DeletionTimestamp != nil {
			continue
		}
		if err := r.Client.Delete(ctx, pvc); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting claim %s: %w", pvc.Name, err)
		}
	}
	return nil
}

// observedPodsOf reports whether the pass saw pods of the shard: the
// engine judged its nodes, not an empty shard.
func (s *scope) observedPodsOf(name string) bool {
	for _, sh := range s.shards {
		if sh.Name == name {
			return len(sh.Pods) > 0
		}
	}
	return false
}
