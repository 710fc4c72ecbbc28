package controllers

import (
	"slices"
	"testing"

	"github.com/redis-operator/redis-operator/controllers/rotation"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// A rotation between two passwords runs on the pods that are up, so one
// pod that cannot start does not hold it (it starts from the Secret);
// turning authentication on waits for every pod to have an address.
func TestRotationEndpoints(t *testing.T) {
	s := &scope{shards: []*shardPods{{Name: "c-shard-0", Expected: 2, Pods: []podInfo{
		{Name: "c-shard-0-0", IP: "10.0.0.1", Up: true, Ready: true},
		{Name: "c-shard-0-1", Ordinal: 1, State: "Pending"},
	}}}}
	eps, ok := rotationEndpoints(s, rotation.State{Live: "old", Next: "new"})
	if !ok || !slices.Equal(eps, []topology.Endpoint{{Name: "c-shard-0-0", Addr: "10.0.0.1:6379"}}) {
		t.Fatalf("rotation: %v %v, want the pod that is up", eps, ok)
	}
	if _, ok := rotationEndpoints(s, rotation.State{Live: "new", Previous: "old"}); !ok {
		t.Fatal("the grace period and the removal of the old password wait for a pod that does not run")
	}
	if eps, ok := rotationEndpoints(s, rotation.State{Next: "first"}); ok {
		t.Fatalf("turning authentication on without every pod: %v", eps)
	}
	s.shards[0].Pods[1].IP = "10.0.0.2"
	if eps, ok := rotationEndpoints(s, rotation.State{Next: "first"}); !ok || len(eps) != 2 {
		t.Fatalf("turning authentication on with every pod on an address: %v %v", eps, ok)
	}
}
