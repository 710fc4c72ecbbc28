package controllers

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/resources"
	"github.com/redis-operator/redis-operator/controllers/rollout"
)

// errNotControlled is returned for a child name taken by an object the
// RedisCluster does not control; the controller never takes it over.
type errNotControlled struct{ kind, name string }

func (e errNotControlled) Error() string {
	return fmt.Sprintf("%s %s exists and is not controlled by this RedisCluster; rename or delete it", e.kind, e.name)
}

func checkControlled(rc *cachev1beta1.RedisCluster, live client.Object) error {
	if !metav1.IsControlledBy(live, rc) {
		return errNotControlled{kind: reflect.TypeOf(live).Elem().Name(), name: live.GetName()}
	}
	return nil
}

// apply makes the live object match desired with server-side apply, field
// owner FieldOwner (forcing ownership back from whoever edited a field the
// operator sets). It sends nothing when the live object already has every
// field desired sets (see drifted), so API defaults or other managers'
// fields never cause a write and a settled cluster makes none, while a
// hand edit (a StatefulSet scaled to 0, an edited ConfigMap, a removed
// Service port) is reverted in the next pass. live must be an empty object
// of desired's type; it is filled from the cache (or the API server, see
// getChild). A pair found in agreement before is not compared again (see
// agreement). It reports whether it wrote.
func (r *RedisClusterReconciler) apply(ctx context.Context, s *scope, desired, live client.Object) (bool, error) {
	err := r.getChild(ctx, client.ObjectKeyFromObject(desired), live)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("reading %s: %w", desired.GetName(), err)
	default:
		if err := checkControlled(s.rc, live); err != nil {
			return false, err
		}
		cluster := client.ObjectKeyFromObject(s.rc)
		if r.agreed.agrees(cluster, desired, live) {
			return false, nil
		}
		path, differs, err := drifted(desired, live)
		if err != nil {
			return false, err
		}
		if !differs {
			r.agreed.remember(cluster, desired, live)
			return false, nil
		}
		if live.GetAnnotations()[resources.AppliedHashAnnotation] == desired.GetAnnotations()[resources.AppliedHashAnnotation] {
			s.log.Info("Reverting a change made to a child", "kind", desired.GetObjectKind().GroupVersionKind().Kind,
				"name", desired.GetName(), "field", path)
		}
	}
	s.log.Info("Applying child", "kind", desired.GetObjectKind().GroupVersionKind().Kind, "name", desired.GetName())
	if err := r.Client.Patch(ctx, desired, client.Apply, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("applying %s %s: %w", desired.GetObjectKind().GroupVersionKind().Kind, desired.GetName(), err)
	}
	return true, nil
}

// reconcileChildren applies the ConfigMap, the Services, the NetworkPolicy
// (or deletes it, see reconcileNetworkPolicy), and per desired
// shard the PDB and the StatefulSet. While paused, StatefulSets are left
// alone (a new shard, a replica count or a template change would change
// the topology or restart pods). Leaving shards are kept running
// (keepLeavingShards) until removeLeftShards deletes them once the engine
// says they are drained.
func (r *RedisClusterReconciler) reconcileChildren(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	rc := s.rc
	for _, c := range []struct{ desired, live client.Object }{
		{resources.ConfigMap(rc), &corev1.ConfigMap{}},
		{resources.HeadlessService(rc), &corev1.Service{}},
		{resources.ClientService(rc), &corev1.Service{}},
	} {
		if _, err := r.apply(ctx, s, c.desired, c.live); err != nil {
			return ctrl.Result{}, true, err
		}
	}
	if err := r.reconcileNetworkPolicy(ctx, s); err != nil {
		return ctrl.Result{}, true, err
	}

	if err := r.listStatefulSets(ctx, s); err != nil {
		return ctrl.Result{}, true, err
	}
	if err := r.rememberLeaving(ctx, s); err != nil {
		return ctrl.Result{}, true, err
	}
	if err := r.placeShards(ctx, s); err != nil {
		return ctrl.Result{}, true, err
	}
	var created []string
	defer func() {
		if len(created) > 0 {
			s.did("ShardCreated", "Created StatefulSets %s", strings.Join(created, ", "))
		}
	}()
	for i := 0; i < int(rc.Spec.Shards); i++ {
		if _, err := r.apply(ctx, s, resources.PodDisruptionBudget(rc, i), &policyv1.PodDisruptionBudget{}); err != nil {
			return ctrl.Result{}, true, err
		}
		if rc.Spec.Paused {
			continue
		}
		live := s.statefulSets[i]
		desired := r.desiredStatefulSet(s, i, live, false)
		wrote, err := r.apply(ctx, s, desired, &appsv1.StatefulSet{})
		if err != nil {
			return ctrl.Result{}, true, err
		}
		if wrote && live == nil {
			created = append(created, desired.Name)
		}
	}
	if err := r.keepLeavingShards(ctx, s); err != nil {
		return ctrl.Result{}, true, err
	}
	return ctrl.Result{}, false, r.listStatefulSets(ctx, s)
}

// desiredStatefulSet is the builder's StatefulSet (built once per
// resourceVersion of the RedisCluster, builtmemo.go), adjusted to what the
// live one allows: volume claim templates are immutable, so an existing
// StatefulSet keeps its own (a storage change applies to new shards only);
// and unless shrink is set, a replica count going down keeps the live
// count: the StatefulSet controller removes the highest ordinals, which
// may include the master, so reconcileReplicaScaleDown lowers it only
// after it has seen this pass that the master is on a pod that stays.
func (r *RedisClusterReconciler) desiredStatefulSet(s *scope, shard int, live *appsv1.StatefulSet, shrink bool) *appsv1.StatefulSet {
	desired := r.built.get(s.rc, shard, s.placement[shard])
	if s.restore != nil {
		resources.WithRestore(desired, shard, s.restore)
	}
	if live == nil {
		return desired
	}
	adjusted := false
	if len(live.Spec.VolumeClaimTemplates) > 0 && !claimTemplatesEqual(live.Spec.VolumeClaimTemplates, desired.Spec.VolumeClaimTemplates) {
		desired.Spec.VolumeClaimTemplates = nil
		for _, t := range live.Spec.VolumeClaimTemplates {
			desired.Spec.VolumeClaimTemplates = append(desired.Spec.VolumeClaimTemplates, corev1.PersistentVolumeClaim{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
				ObjectMeta: metav1.ObjectMeta{Name: t.Name, Labels: t.Labels, Annotations: t.Annotations},
				Spec:       t.Spec,
			})
		}
		adjusted = true
	}
	if liveReplicas := ptrOr(live.Spec.Replicas, 1); liveReplicas > *desired.Spec.Replicas && !shrink {
		desired.Spec.Replicas = &liveReplicas
		adjusted = true
	}
	if adjusted {
		resources.SetAppliedHash(desired)
	}
	return desired
}

func claimTemplatesEqual(live, desired []corev1.PersistentVolumeClaim) bool {
	if len(live) != len(desired) {
		return false
	}
	for i := range live {
		l, d := live[i].Spec, desired[i].Spec
		if live[i].Name != desired[i].Name || !l.Resources.Requests.Storage().Equal(*d.Resources.Requests.Storage()) ||
			ptrOr(l.StorageClassName, "") != ptrOr(d.StorageClassName, "") {
			return false
		}
	}
	return true
}

// listStatefulSets fills s.statefulSets with the cluster's shard StatefulSets.
func (r *RedisClusterReconciler) listStatefulSets(ctx context.Context, s *scope) error {
	var list appsv1.StatefulSetList
	if err := r.Client.List(ctx, &list, client.InNamespace(s.rc.Namespace),
		client.MatchingLabels{resources.LabelCluster: s.rc.Name, resources.LabelManagedBy: resources.ManagedBy}); err != nil {
		return fmt.Errorf("listing StatefulSets: %w", err)
	}
	s.statefulSets = map[int]*appsv1.StatefulSet{}
	for i := range list.Items {
		sts := &list.Items[i]
		idx, ok := resources.ShardIndex(s.rc.Name, sts.Name)
		if !ok || !metav1.IsControlledBy(sts, s.rc) {
			continue
		}
		s.statefulSets[idx] = sts
	}
	return nil
}

// observePods groups the cluster's pods by shard and records pod counts,
// stale pods and leaving shards, and reports new OOM kills of their redis
// containers (reportOOMKills).
func (r *RedisClusterReconciler) observePods(ctx context.Context, s *scope) (ctrl.Result, bool, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(s.rc.Namespace),
		client.MatchingLabels{resources.LabelCluster: s.rc.Name, resources.LabelManagedBy: resources.ManagedBy}); err != nil {
		return ctrl.Result{}, true, fmt.Errorf("listing pods: %w", err)
	}
	r.reportOOMKills(s, pods.Items)
	rc := s.rc
	s.shards = groupPods(rc.Name, int(rc.Spec.Shards), int(rc.Spec.ReplicasPerShard),
		func(i int) string { return r.built.templateHash(rc, i, s.placement[i]) }, s.statefulSets, s.leaving, pods.Items)
	r.placePods(ctx, s)
	s.obs.PodsObserved = true
	s.obs.Pods = podsSummary(s.shards, s.now)
	s.obs.StalePods = rollout.Stale(rolloutShards(s.shards))
	s.obs.Leaving = nil
	for _, sh := range s.shards {
		if !sh.Desired {
			s.obs.Leaving = append(s.obs.Leaving, sh.Name)
		}
	}
	return ctrl.Result{}, false, nil
}

// podToCluster maps a Redis pod to its RedisCluster by label.
func podToCluster(_ context.Context, o client.Object) []ctrl.Request {
	name := o.GetLabels()[resources.LabelCluster]
	if name == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: name}}}
}
