package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// Annotations on the ConfigMap recording the live config last applied to
// every node, so that a pass applies it only when it changed and can set
// a key removed from spec.config back to its default.
const (
	liveConfigHashAnnotation = "cache.redis.io/live-config-hash"
	liveConfigKeysAnnotation = "cache.redis.io/live-config-keys"
)

// reconcileLiveConfig applies the live part of the config (see
// resources.LiveConfigDefaults) with CONFIG SET on every node (nothing is
// written to the node's disk), without restarts, once the topology
// converged, or settled around pods that do not run (Result.Settled), and
// no rolling step ran this pass. New or restarted pods read the same
// values from the ConfigMap, which the children phase updated first. With
// pods that do not run, the nodes that do get the config and it is not
// recorded as applied: a container restarting may read a ConfigMap volume
// the kubelet has not refreshed yet, so the first converged pass applies
// it again, to every node, and records it.
func (r *RedisClusterReconciler) reconcileLiveConfig(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	if s.rc.Spec.Paused || s.result == nil || !(s.result.Converged || s.result.Settled) || s.acted {
		return ctrl.Result{}, false, nil
	}
	cm := &corev1.ConfigMap{}
	if err := r.getChild(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.ConfigMapName(s.rc.Name)}, cm); err != nil {
		return ctrl.Result{}, true, fmt.Errorf("reading ConfigMap: %w", err)
	}
	desired := resources.LiveConfig(s.rc)
	hash := resources.Hash(desired)
	if cm.Annotations[liveConfigHashAnnotation] == hash {
		return ctrl.Result{}, false, nil
	}
	var previous []string
	if k := cm.Annotations[liveConfigKeysAnnotation]; k != "" {
		previous = strings.Split(k, ",")
	}
	apply := resources.LiveConfigToApply(desired, previous)
	var eps []topology.Endpoint
	var down []string
	for _, sh := range s.shards {
		for _, p := range sh.Pods {
			if !p.Up {
				down = append(down, p.Name)
				continue
			}
			eps = append(eps, p.endpoint())
		}
	}
	keys := slices.Sorted(maps.Keys(apply))
	s.log.Info("Applying live config", "keys", strings.Join(keys, ","), "nodes", len(eps), "notRunning", down)
	actx, cancel := context.WithTimeout(ctx, 2*r.RedisTimeout)
	defer cancel()
	if err := r.engine(s, s.password).ApplyConfig(actx, eps, apply); err != nil {
		s.failed("ConfigFailed", "CONFIG SET of %s failed: %v", strings.Join(keys, ", "), err)
		if isTransient(err) {
			return ctrl.Result{RequeueAfter: busyRequeue}, false, nil
		}
		s.obs.ReconcileErr = fmt.Errorf("applying live config: %w", err)
		return ctrl.Result{}, true, s.obs.ReconcileErr
	}

	if len(down) > 0 {
		return ctrl.Result{}, false, nil
	}
	base := cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[liveConfigHashAnnotation] = hash
	cm.Annotations[liveConfigKeysAnnotation] = strings.Join(slices.Sorted(maps.Keys(desired)), ",")
	if err := r.Client.Patch(ctx, cm, client.MergeFrom(base), client.FieldOwner(FieldOwner+"-live-config")); err != nil {
		return ctrl.Result{}, true, fmt.Errorf("recording applied live config: %w", err)
	}
	if base.Annotations[liveConfigHashAnnotation] != "" {
		s.did("ConfigApplied", "Applied %s on %d nodes without restart", strings.Join(keys, ", "), len(eps))
	}
	return ctrl.Result{}, false, nil
}
