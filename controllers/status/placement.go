package status

import (
	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
)

// placeShards fills in each shard's MasterNode and ReplicaNodes from nodes
// (pod name to Kubernetes node, Pods.Nodes) and returns shards. A pod not
// in nodes (missing or not scheduled) gets "", and ReplicaNodes stays nil
// when no replica pod is scheduled, so the status only changes when a pod
// is rescheduled or changes role.
func placeShards(shards []cachev1beta1.ShardStatus, nodes map[string]string) []cachev1beta1.ShardStatus {
	for i := range shards {
		sh := &shards[i]
		sh.MasterNode = nodes[sh.MasterPod]
		sh.ReplicaNodes = nil
		scheduled := false
		for _, p := range sh.ReplicaPods {
			scheduled = scheduled || nodes[p] != ""
		}
		if scheduled {
			for _, p := range sh.ReplicaPods {
				sh.ReplicaNodes = append(sh.ReplicaNodes, nodes[p])
			}
		}
	}
	return shards
}
