package resources

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// Weights of the default preferred pod anti-affinity terms (1–100, the
// scheduler's scale): the node matters most, since a node holds both pods
// of a shard far more often than a zone is lost.
const (
	shardNodeWeight = 100
	shardZoneWeight = 50
)

// podIndexLabel is the label the StatefulSet controller puts on each pod
// with its ordinal (Kubernetes 1.28+, on by default since 1.32).
const podIndexLabel = "apps.kubernetes.io/pod-index"

// placement returns the affinity and topology spread constraints of a
// shard's pods: the defaults below, to which spec.pod adds.
//
// Defaults, all preferred (scored, never blocking), because a pure builder
// cannot know how many nodes and zones a cluster has and a required rule
// would leave a replica Pending forever on a cluster of one node (and
// stall the rollout behind it); cloudnative-pg's default anti-affinity is
// preferred for the same reason:
//   - the pods of one shard on different nodes (weight 100) and in
//     different zones (weight 50), so losing one takes at most one pod of
//     each shard;
//   - the first pods of the shards (ordinal 0, the pods the engine makes
//     masters when it forms a cluster) spread evenly over zones and over
//     nodes (maxSkew 1, ScheduleAnyway).
//
// spec.pod.affinity adds to this: its node and pod affinity are taken as
// given, its required anti-affinity terms are kept and its preferred ones
// are appended to the defaults (a user who wants the shard rule required
// adds the required term). A constraint of spec.pod.topologySpreadConstraints
// replaces the default one with the same topologyKey and whenUnsatisfiable
// (the API allows one per pair) and the others are appended.
func placement(rc *cachev1beta1.RedisCluster, shard int) (*corev1.Affinity, []corev1.TopologySpreadConstraint) {
	shardPods := &metav1.LabelSelector{MatchLabels: ShardSelector(rc.Name, shard)}
	anti := []corev1.WeightedPodAffinityTerm{
		{Weight: shardNodeWeight, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: shardPods, TopologyKey: corev1.LabelHostname}},
		{Weight: shardZoneWeight, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: shardPods.DeepCopy(), TopologyKey: corev1.LabelTopologyZone}},
	}
	affinity := &corev1.Affinity{}
	if user := rc.Spec.Pod.Affinity; user != nil {
		affinity = user.DeepCopy()
	}
	if affinity.PodAntiAffinity == nil {
		affinity.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(anti,
		affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)

	firstPods := ClusterSelector(rc.Name)
	firstPods[podIndexLabel] = "0"
	var spread []corev1.TopologySpreadConstraint
	for _, key := range []string{corev1.LabelTopologyZone, corev1.LabelHostname} {
		if !hasSpread(rc.Spec.Pod.TopologySpreadConstraints, key, corev1.ScheduleAnyway) {
			spread = append(spread, corev1.TopologySpreadConstraint{
				MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector: &metav1.LabelSelector{MatchLabels: firstPods},
			})
		}
	}
	return affinity, append(spread, rc.Spec.Pod.TopologySpreadConstraints...)
}

func hasSpread(cs []corev1.TopologySpreadConstraint, key string, when corev1.UnsatisfiableConstraintAction) bool {
	for _, c := range cs {
		if c.TopologyKey == key && c.WhenUnsatisfiable == when {
			return true
		}
	}
	return false
}
