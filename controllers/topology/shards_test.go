package topology

import (
	"reflect"
	"testing"
)

// TestShards: the per-shard summary of a view the engine did not act on is
// the planner's own choice of master, for the captured 3×1 cluster in the
// states that make the choice matter.
func TestShards(t *testing.T) {
	d := fixtureDesired(nil)
	healthy := []ShardStatus{
		{Name: "s0", MasterName: "s0-0", MasterNodeID: fixtureIDs["s0-0"], ReplicaNames: []string{"s0-1"}, SlotRanges: []string{"0-5460"}, SlotCount: 5461},
		{Name: "s1", MasterName: "s1-0", MasterNodeID: fixtureIDs["s1-0"], ReplicaNames: []string{"s1-1"}, SlotRanges: []string{"5461-10922"}, SlotCount: 5462},
		{Name: "s2", MasterName: "s2-0", MasterNodeID: fixtureIDs["s2-0"], ReplicaNames: []string{"s2-1"}, SlotRanges: []string{"10923-16383"}, SlotCount: 5461},
	}
	withShard2 := func(s2 ShardStatus) []ShardStatus {
		out := append([]ShardStatus{}, healthy[:2]...)
		return append(out, s2)
	}
	for _, tc := range []struct {
		name string
		view *ClusterView
		want []ShardStatus
	}{
		{name: "healthy", view: fixtureView(t, "healthy-3x1.cluster-nodes.txt", d), want: healthy},
		{
			// The tables still name the dead master as the owner of its slots, and its
			// replica still follows it: both stay the shard's.
			name: "master unreachable, not failed over yet",
			view: fixtureView(t, "master-down.pfail.cluster-nodes.txt", d, down("s2-0")),
			want: withShard2(ShardStatus{Name: "s2", MasterNodeID: fixtureIDs["s2-0"], ReplicaNames: []string{"s2-1"},
				SlotRanges: []string{"10923-16383"}, SlotCount: 5461}),
		},
		{
			name: "replica promoted: it is the master, without a replica",
			view: fixtureView(t, "master-down.failed-and-promoted.cluster-nodes.txt", d, down("s2-0")),
			want: withShard2(ShardStatus{Name: "s2", MasterName: "s2-1", MasterNodeID: fixtureIDs["s2-1"],
				SlotRanges: []string{"10923-16383"}, SlotCount: 5461}),
		},
		{name: "no view", view: nil, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Shards(tc.view, d); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Shards:\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}

	// A shard being added owns no slot yet: its first empty master is the
	// candidate the planner gives slots to, and the node following it is its
	// replica.
	t.Run("new shard: the candidate master", func(t *testing.T) {
		const newID, newReplicaID = "00000000000000000000000000000000000000a8", "00000000000000000000000000000000000000a9"
		grown := fixtureDesired(nil)
		grown.Shards = append(grown.Shards, ShardSpec{Name: "s3", Nodes: []Endpoint{{Name: "s3-0", Addr: "127.0.0.8:6379"}, {Name: "s3-1", Addr: "127.0.0.9:6379"}}})
		v := fixtureView(t, "healthy-3x1.cluster-nodes.txt", d)
		master := NodeRecord{ID: newID, IP: "127.0.0.8", Port: 6379, Flags: NodeFlags{Myself: true, Master: true}, Connected: true}
		replica := NodeRecord{ID: newReplicaID, IP: "127.0.0.9", Port: 6379, Flags: NodeFlags{Myself: true, Replica: true}, MasterID: newID, Connected: true}
		v.Nodes = append(v.Nodes,
			&NodeView{Endpoint: grown.Shards[3].Nodes[0], ID: newID, Known: []NodeRecord{master}},
			&NodeView{Endpoint: grown.Shards[3].Nodes[1], ID: newReplicaID, Known: []NodeRecord{replica}})
		want := append(append([]ShardStatus{}, healthy...), ShardStatus{Name: "s3", MasterName: "s3-0", MasterNodeID: newID, ReplicaNames: []string{"s3-1"}})
		if got := Shards(v, grown); !reflect.DeepEqual(got, want) {
			t.Errorf("Shards:\n%+v\nwant\n%+v", got, want)
		}
	})
}
