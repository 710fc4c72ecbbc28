package resources

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

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

// Placement is what the builders need to know of the nodes and cannot
// read from the RedisCluster: the controller reads the nodes and passes it
// (controllers/nodes.go). The zero value is the placement for a cluster
// whose nodes are unknown.
type Placement struct {
	// ShardNodesRequired makes "no two pods of a shard on one node" a
	// required anti-affinity term instead of a preferred one. The
	// controller sets it when at least as many nodes can run the cluster's
	// pods as a shard has pods (Schedulable), so the rule can always be
	// met and losing a node never takes two pods of a shard.
	ShardNodesRequired bool
	// ShardZonesRequired does the same for "no two pods of a shard in one
	// zone", set when the nodes that can run the pods span at least as
	// many zones as a shard has pods.
	ShardZonesRequired bool
	// ExporterSecretUID is the UID of the Secret holding the exporter
	// sidecar's password (ExporterSecretName), which the pod template
	// carries with spec.exporter enabled (ExporterSecretAnnotation): a
	// password made again under a new Secret changes the template, so the
	// pods roll and their sidecars start with it. Not a placement rule; it
	// rides here because it too is known only to the controller.
	ExporterSecretUID string
}

// placement returns the affinity and topology spread constraints of a
// shard's pods: the defaults below, to which spec.pod adds.
//
// Defaults:
//   - the pods of one shard on different nodes: required when
//     p.ShardNodesRequired, otherwise preferred (weight 100), since a
//     required rule on a cluster with fewer nodes than a shard has pods
//     would leave a replica Pending forever (and stall the rollout behind
//     it); cloudnative-pg's default anti-affinity is preferred for the same
//     reason;
//   - the pods of one shard in different zones: required when
//     p.ShardZonesRequired, otherwise preferred (weight 50), so losing a
//     zone takes at most one pod of each shard. Preferred alone does not
//     hold it: the scheduler normalises each plugin's scores, and the
//     spread of the first pods over nodes can outweigh it on a zone with
//     more nodes than the others;
//   - the first pods of the shards (ordinal 0, the pods the engine makes
//     masters when it forms a cluster) spread evenly over zones and over
//     nodes (maxSkew 1, ScheduleAnyway).
//
// spec.pod.affinity adds to this: its node and pod affinity are taken as
// given, its required anti-affinity terms are kept (after the default
// required one) and its preferred ones are appended to the defaults. A
// constraint of spec.pod.topologySpreadConstraints replaces the default one
// with the same topologyKey and whenUnsatisfiable (the API allows one per
// pair) and the others are appended.
func placement(rc *cachev1beta1.RedisCluster, shard int, p Placement) (*corev1.Affinity, []corev1.TopologySpreadConstraint) {
	shardPods := &metav1.LabelSelector{MatchLabels: ShardSelector(rc.Name, shard)}
	var required []corev1.PodAffinityTerm
	var anti []corev1.WeightedPodAffinityTerm
	for _, rule := range []struct {
		key      string
		required bool
		weight   int32
	}{
		{corev1.LabelHostname, p.ShardNodesRequired, shardNodeWeight},
		{corev1.LabelTopologyZone, p.ShardZonesRequired, shardZoneWeight},
	} {
		term := corev1.PodAffinityTerm{LabelSelector: shardPods.DeepCopy(), TopologyKey: rule.key}
		if rule.required {
			required = append(required, term)
		} else {
			anti = append(anti, corev1.WeightedPodAffinityTerm{Weight: rule.weight, PodAffinityTerm: term})
		}
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
	if required != nil {
		affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(required,
			affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
	}

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

// Schedulable counts the nodes that can run the pods of rc, and the
// distinct topology.kubernetes.io/zone labels among them, as far as the
// nodes themselves tell: their labels match spec.pod.nodeSelector and
// the required node affinity of spec.pod.affinity, and spec.pod.tolerations
// tolerate their NoSchedule and NoExecute taints. The taints Kubernetes
// sets for a node's conditions (node.kubernetes.io/..., such as
// unreachable, not-ready and unschedulable for a cordoned node) are not
// held against a node: a node that is briefly down or drained still
// counts, so a node failure or a drain never changes the placement.
func Schedulable(rc *cachev1beta1.RedisCluster, nodes []corev1.Node) (count, zones int) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: rc.Spec.Pod.NodeSelector, Affinity: rc.Spec.Pod.Affinity}}
	required := nodeaffinity.GetRequiredNodeAffinity(pod)
	seen := map[string]bool{}
	for i := range nodes {
		if ok, err := required.Match(&nodes[i]); err != nil || !ok {
			continue
		}
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(nodes[i].Spec.Taints, rc.Spec.Pod.Tolerations,
			func(t *corev1.Taint) bool {
				return (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) &&
					!strings.HasPrefix(t.Key, conditionTaintPrefix)
			})
		if !untolerated {
			count++
			if z := nodes[i].Labels[corev1.LabelTopologyZone]; z != "" && !seen[z] {
				seen[z] = true
				zones++
			}
		}
	}
	return count, zones
}

// conditionTaintPrefix prefixes the taints the node lifecycle controller
// and `kubectl cordon` set for a node's conditions
// (https://kubernetes.io/docs/reference/labels-annotations-taints/).
const conditionTaintPrefix = "node.kubernetes.io/"

// PlacementOf reads which shard rules sts's pod template already requires
// (the terms placement adds for Placement's fields), so that a rule, once
// a shard's pods run under it, is kept.
func PlacementOf(sts *appsv1.StatefulSet) Placement {
	var p Placement
	a := sts.Spec.Template.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return p
	}
	shard := sts.Spec.Template.Labels[LabelShard]
	for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.LabelSelector == nil || shard == "" || t.LabelSelector.MatchLabels[LabelShard] != shard {
			continue
		}
		switch t.TopologyKey {
		case corev1.LabelHostname:
			p.ShardNodesRequired = true
		case corev1.LabelTopologyZone:
			p.ShardZonesRequired = true
		}
	}
	return p
}
