package status

import (
	"slices"
	"testing"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

func TestPlaceShards(t *testing.T) {
	nodes := map[string]string{"c-shard-0-0": "node-a", "c-shard-0-1": "node-b", "c-shard-1-1": "node-c"}
	got := placeShards([]cachev1beta1.ShardStatus{
		{Name: "c-shard-0", MasterPod: "c-shard-0-0", ReplicaPods: []string{"c-shard-0-1"}},
		// The master's pod is gone (last known master kept), its replica runs.
		{Name: "c-shard-1", MasterPod: "c-shard-1-0", ReplicaPods: []string{"c-shard-1-1", "c-shard-1-2"}},
		// No replica pod scheduled: no ReplicaNodes at all.
		{Name: "c-shard-2", MasterPod: "c-shard-2-0", ReplicaPods: []string{"c-shard-2-1"}, ReplicaNodes: []string{"stale"}},
	}, nodes)
	want := []struct {
		master   string
		replicas []string
	}{{"node-a", []string{"node-b"}}, {"", []string{"node-c", ""}}, {"", nil}}
	for i, w := range want {
		if got[i].MasterNode != w.master || !slices.Equal(got[i].ReplicaNodes, w.replicas) {
			t.Errorf("shard %d: master node %q replica nodes %q, want %q %q", i, got[i].MasterNode, got[i].ReplicaNodes, w.master, w.replicas)
		}
	}
	again := placeShards(slices.Clone(got), nodes)
	for i := range got {
		if again[i].MasterNode != got[i].MasterNode || !slices.Equal(again[i].ReplicaNodes, got[i].ReplicaNodes) {
			t.Errorf("shard %d changed on a second pass with the same pods", i)
		}
	}
}
