package resources

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// term is one anti-affinity term in short: weight (0 for required),
// topology key and the shard label it selects ("" for none).
type term struct {
	weight int32
	key    string
	shard  string
}

func antiTerms(a *corev1.Affinity) []term {
	var out []term
	for _, r := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		out = append(out, term{0, r.TopologyKey, r.LabelSelector.MatchLabels[LabelShard]})
	}
	for _, p := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		out = append(out, term{p.Weight, p.PodAffinityTerm.TopologyKey, p.PodAffinityTerm.LabelSelector.MatchLabels[LabelShard]})
	}
	return out
}

func TestPlacement(t *testing.T) {
	userRequired := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}}
	userPreferred := corev1.WeightedPodAffinityTerm{Weight: 7, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: "rack",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}}}
	userZoneSpread := corev1.TopologySpreadConstraint{MaxSkew: 2, TopologyKey: corev1.LabelTopologyZone,
		WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}}
	userRackSpread := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule}
	defaults := []term{{100, corev1.LabelHostname, "2"}, {50, corev1.LabelTopologyZone, "2"}}

	for _, tc := range []struct {
		name        string
		pod         cachev1beta1.PodSpec
		placement   Placement
		wantAnti    []term
		wantNode    bool
		wantSpread  []string // topology keys in order, "=" marks the user's zone constraint
		firstPodsOf string
	}{
		{name: "defaults", wantAnti: defaults,
			wantSpread: []string{corev1.LabelTopologyZone, corev1.LabelHostname}},
		{name: "user affinity adds",
			pod: cachev1beta1.PodSpec{Affinity: &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{},
				PodAntiAffinity: &corev1.PodAntiAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution:  []corev1.PodAffinityTerm{userRequired},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{userPreferred},
				}}},
			wantAnti: append([]term{{0, corev1.LabelHostname, ""}}, append(defaults, term{7, "rack", ""})...), wantNode: true,
			wantSpread: []string{corev1.LabelTopologyZone, corev1.LabelHostname}},
		{name: "shard nodes required", placement: Placement{ShardNodesRequired: true},
			wantAnti:   []term{{0, corev1.LabelHostname, "2"}, {50, corev1.LabelTopologyZone, "2"}},
			wantSpread: []string{corev1.LabelTopologyZone, corev1.LabelHostname}},
		{name: "shard nodes and zones required before the user's required term", placement: Placement{ShardNodesRequired: true, ShardZonesRequired: true},
			pod: cachev1beta1.PodSpec{Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{userRequired}}}},
			wantAnti:   []term{{0, corev1.LabelHostname, "2"}, {0, corev1.LabelTopologyZone, "2"}, {0, corev1.LabelHostname, ""}},
			wantSpread: []string{corev1.LabelTopologyZone, corev1.LabelHostname}},
		{name: "user spread replaces the same pair and adds others",
			pod:        cachev1beta1.PodSpec{TopologySpreadConstraints: []corev1.TopologySpreadConstraint{userZoneSpread, userRackSpread}},
			wantAnti:   defaults,
			wantSpread: []string{corev1.LabelHostname, "=" + corev1.LabelTopologyZone, "rack"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := cluster(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Pod = tc.pod })
			before := rc.DeepCopy()
			spec := StatefulSet(rc, 2, tc.placement).Spec.Template.Spec
			if got := antiTerms(spec.Affinity); !slices.Equal(got, tc.wantAnti) {
				t.Errorf("anti-affinity %v, want %v", got, tc.wantAnti)
			}
			if (spec.Affinity.NodeAffinity != nil) != tc.wantNode {
				t.Errorf("node affinity %v, want present %v", spec.Affinity.NodeAffinity, tc.wantNode)
			}
			var keys []string
			for _, c := range spec.TopologySpreadConstraints {
				k := c.TopologyKey
				if c.MaxSkew == 2 {
					k = "=" + k
				}
				keys = append(keys, k)
				if c.MaxSkew == 1 && c.WhenUnsatisfiable == corev1.ScheduleAnyway {
					if sel := c.LabelSelector.MatchLabels; sel[podIndexLabel] != "0" || sel[LabelCluster] != rc.Name || sel[LabelShard] != "" {
						t.Errorf("default spread of %s selects %v, want the cluster's ordinal-0 pods", k, sel)
					}
				}
			}
			if !slices.Equal(keys, tc.wantSpread) {
				t.Errorf("spread keys %v, want %v", keys, tc.wantSpread)
			}
			if !equalSpec(before, rc) {
				t.Error("the builder changed the RedisCluster's spec")
			}
		})
	}
}

func equalSpec(a, b *cachev1beta1.RedisCluster) bool {
	return Hash(a.Spec) == Hash(b.Spec)
}

// TestSchedulable: a node counts when the pods' node selector and
// required node affinity match it and their tolerations cover its
// NoSchedule and NoExecute taints, except the taints of a node's
// conditions, which a node down or cordoned for a while carries; zones are
// the distinct zone labels of the nodes that count.
func TestSchedulable(t *testing.T) {
	node := func(name string, labels map[string]string, taints ...corev1.Taint) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{Taints: taints}}
	}
	redisPool := map[string]string{"pool": "redis", corev1.LabelTopologyZone: "a"}
	zone := func(z string) map[string]string { return map[string]string{corev1.LabelTopologyZone: z} }
	nodes := []corev1.Node{
		node("plain", nil),
		node("pool", redisPool),
		node("control-plane", zone("c"), corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}),
		node("dedicated", map[string]string{"pool": "redis", corev1.LabelTopologyZone: "b"},
			corev1.Taint{Key: "dedicated", Value: "redis", Effect: corev1.TaintEffectNoExecute}),
		node("prefer-not", zone("a"), corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}),
		node("lost", zone("d"), corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}),
		node("cordoned", redisPool, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}),
	}
	inPool := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"redis"}}}}}}}}
	tolerateDedicated := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "redis", Effect: corev1.TaintEffectNoExecute}}
	for _, tc := range []struct {
		name         string
		pod          cachev1beta1.PodSpec
		count, zones int
	}{
		{"no constraints", cachev1beta1.PodSpec{}, 5, 2},
		{"node selector", cachev1beta1.PodSpec{NodeSelector: map[string]string{"pool": "redis"}}, 2, 1},
		{"required node affinity", cachev1beta1.PodSpec{Affinity: inPool}, 2, 1},
		{"node selector and toleration", cachev1beta1.PodSpec{NodeSelector: map[string]string{"pool": "redis"}, Tolerations: tolerateDedicated}, 3, 2},
	} {
		rc := cluster(func(rc *cachev1beta1.RedisCluster) { rc.Spec.Pod = tc.pod })
		if count, zones := Schedulable(rc, nodes); count != tc.count || zones != tc.zones {
			t.Errorf("%s: %d schedulable nodes in %d zones, want %d in %d", tc.name, count, zones, tc.count, tc.zones)
		}
	}
}
