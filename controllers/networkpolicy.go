package controllers

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/redis-operator/redis-operator/controllers/resources"
)

// reconcileNetworkPolicy applies resources.NetworkPolicy while
// spec.networkPolicy.enabled (see applyNetworkPolicy), and otherwise deletes the NetworkPolicy of that name if this RedisCluster
// controls it (one it does not control is left alone). Pausing does not
// stop it: the policy changes no topology.
func (r *RedisClusterReconciler) reconcileNetworkPolicy(ctx context.Context, s *scope) error {
	if np := s.rc.Spec.NetworkPolicy; np != nil && np.Enabled {
		return r.applyNetworkPolicy(ctx, s)
	}
	live := &networkingv1.NetworkPolicy{}
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.NetworkPolicyName(s.rc.Name)}
	if err := r.Client.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("reading NetworkPolicy %s: %w", key.Name, err)
	}
	if !metav1.IsControlledBy(live, s.rc) || !live.DeletionTimestamp.IsZero() {
		return nil
	}
	s.log.Info("Deleting the NetworkPolicy: spec.networkPolicy is not enabled", "name", key.Name)
	if err := r.Client.Delete(ctx, live, client.Preconditions{UID: &live.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting NetworkPolicy %s: %w", key.Name, err)
	}
	return nil
}

// applyNetworkPolicy applies resources.NetworkPolicy like every child and
// then requires the live spec to equal it exactly: apply reverts only the
// fields the operator sets, and for a NetworkPolicy an ingress rule or
// peer added by hand, or a label added to its podSelector (which would
// leave some of the cluster's pods unprotected), opens access. Such a
// spec is replaced whole with an update.
func (r *RedisClusterReconciler) applyNetworkPolicy(ctx context.Context, s *scope) error {
	desired := resources.NetworkPolicy(s.rc, r.OperatorNamespace)
	want := desired.Spec.DeepCopy()
	live := &networkingv1.NetworkPolicy{}
	wrote, err := r.apply(ctx, s, desired, live)
	if err != nil {
		return err
	}
	current := live
	if wrote {
		// The API server's answer to the apply.
		current = desired
	}
	if equality.Semantic.DeepEqual(current.Spec, *want) {
		return nil
	}
	s.log.Info("Reverting a change made to a child", "kind", "NetworkPolicy", "name", current.Name, "field", "spec")
	current.Spec = *want
	if err := r.Client.Update(ctx, current, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("updating NetworkPolicy %s: %w", current.Name, err)
	}
	return nil
}
