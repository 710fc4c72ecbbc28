package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// emitTransitionEvents records the pass's action events and one event per
// condition transition worth a person's attention: Ready turning True or
// False, Degraded turning True (Warning, with its reason), and a new kind
// of progress (scaling, upgrading, bootstrapping). A pass that changes
// nothing emits nothing.
func (r *RedisClusterReconciler) emitTransitionEvents(s *scope) {
	old := s.original.Status.Conditions
	cur := s.rc.Status.Conditions
	get := func(list []metav1.Condition, t string) *metav1.Condition { return meta.FindStatusCondition(list, t) }

	if o, n := get(old, cachev1beta1.RedisClusterDegradedCondition), get(cur, cachev1beta1.RedisClusterDegradedCondition); n != nil &&
		n.Status == "True" && (o == nil || o.Status != "True" || o.Reason != n.Reason) {
		s.warning(n.Reason, "%s", n.Message)
	}
	announced := false
	if o, n := get(old, cachev1beta1.RedisClusterProgressingCondition), get(cur, cachev1beta1.RedisClusterProgressingCondition); n != nil &&
		n.Status == "True" && (o == nil || o.Status != "True" || o.Reason != n.Reason) {
		switch n.Reason {
		case cachev1beta1.RedisClusterScalingReason, cachev1beta1.RedisClusterUpgradingReason, cachev1beta1.RedisClusterBootstrappingReason:
			s.normal(n.Reason, "%s", n.Message)
			announced = true
		}
	}
	mastersChanged(s)
	o, n := get(old, cachev1beta1.RedisClusterReadyCondition), get(cur, cachev1beta1.RedisClusterReadyCondition)
	switch {
	case n == nil:
	case n.Status == "True" && (o == nil || o.Status != "True"):
		s.normal("Ready", "%s", n.Message)
	case n.Status != "True" && o != nil && o.Status == "True" && !announced:
		s.normal("NotReady", "%s: %s", n.Reason, n.Message)
	}
	r.recordEvents(s, false)
}

// recordEvents records the pass's events, or with actionsOnly only those
// of its actions: when the status write failed (a conflict with a newer
// object), the transitions were computed against a stale status and the
// next pass reports them, but the actions happened and will not again.
func (r *RedisClusterReconciler) recordEvents(s *scope, actionsOnly bool) {
	for _, e := range s.events {
		if actionsOnly && !e.action {
			continue
		}
		typ := corev1.EventTypeNormal
		if e.warning {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Event(s.rc, typ, e.reason, e.message)
	}
}

// mastersChanged records a MasterChanged event for each shard whose master
// node in status.shards is another node than before (both known).
func mastersChanged(s *scope) {
	for _, n := range s.rc.Status.Shards {
		for _, o := range s.original.Status.Shards {
			if o.Name == n.Name && o.MasterNodeID != "" && n.MasterNodeID != "" && o.MasterNodeID != n.MasterNodeID && n.MasterPod != "" {
				s.normal("MasterChanged", "Shard %s: the master is now %s (node %s), was %s (node %s)",
					n.Name, n.MasterPod, n.MasterNodeID, orNone(o.MasterPod), o.MasterNodeID)
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
