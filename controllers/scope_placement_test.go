package controllers

import (
	"testing"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// The engine gets each pod's node and zone (to spread masters) except
// while a rolling update or a replica scale-down moves masters off pods:
// then no endpoint carries a node, and the engine does not spread.
func TestDesiredWithholdsPlacementWhileMastersMove(t *testing.T) {
	shard := func(expected int) *shardPods {
		return &shardPods{Name: "c-shard-0", Desired: true, Expected: expected, Pods: []podInfo{
			{Name: "c-shard-0-0", Ordinal: 0, IP: "10.0.0.1", Up: true, Ready: true, Node: "n1", Zone: "za"},
			{Name: "c-shard-0-1", Ordinal: 1, IP: "10.0.0.2", Up: true, Ready: true, Node: "n2", Zone: "zb"},
		}}
	}
	cases := []struct {
		name     string
		expected int
		stale    []string
		placed   bool
	}{
		{name: "settled: placement given", expected: 2, placed: true},
		{name: "rolling update: withheld", expected: 2, stale: []string{"c-shard-0-1"}},
		{name: "replica scale-down: withheld", expected: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := &cachev1beta1.RedisCluster{}
			rc.Spec.Shards, rc.Spec.ReplicasPerShard = 1, 1
			s := &scope{rc: rc, shards: []*shardPods{shard(tc.expected)}}
			s.obs.StalePods = tc.stale
			for _, ep := range s.desired().Shards[0].Nodes {
				if placed := ep.Node != "" && ep.Zone != ""; placed != tc.placed {
					t.Errorf("%s: node %q zone %q, want placement %v", ep.Name, ep.Node, ep.Zone, tc.placed)
				}
			}
		})
	}
}
