package status

import (
	"errors"
	"slices"
	"testing"

	"github.com/redis-operator/redis-operator/controllers/topology"
)

// node builds a NodeView: a master owning slots, a replica of masterID,
// or (no slots, no master) a fresh node that knows only itself.
func node(name, id string, slots []topology.SlotRange, masterID string, known int, state string) *topology.NodeView {
	self := topology.NodeRecord{ID: id, Slots: slots, MasterID: masterID}
	self.Flags.Myself = true
	if masterID == "" {
		self.Flags.Master = true
	} else {
		self.Flags.Replica = true
	}
	n := &topology.NodeView{Endpoint: topology.Endpoint{Name: name, Addr: "127.0.0.1:6379"}, ID: id, Known: []topology.NodeRecord{self}}
	n.Info.State, n.Info.KnownNodes = state, known
	return n
}

func ids(n string) string { return n + "000000000000000000000000000000000000000"[:40-len(n)] }

func TestSummarize(t *testing.T) {
	r := func(a, b int) []topology.SlotRange { return []topology.SlotRange{{Start: a, End: b}} }
	spec := func(name string, nodes ...string) topology.ShardSpec {
		s := topology.ShardSpec{Name: name}
		for _, n := range nodes {
			s.Nodes = append(s.Nodes, topology.Endpoint{Name: n, Addr: "127.0.0.1:6379"})
		}
		return s
	}
	desired3 := topology.Desired{ReplicasPerShard: 1, Shards: []topology.ShardSpec{spec("s0", "s0-0", "s0-1"), spec("s1", "s1-0", "s1-1"), spec("s2", "s2-0", "s2-1")}}
	healthy := func() []*topology.NodeView {
		return []*topology.NodeView{
			node("s0-0", ids("a"), r(0, 5460), "", 6, "ok"), node("s0-1", ids("a1"), nil, ids("a"), 6, "ok"),
			node("s1-0", ids("b"), r(5461, 10922), "", 6, "ok"), node("s1-1", ids("b1"), nil, ids("b"), 6, "ok"),
			node("s2-0", ids("c"), r(10923, 16383), "", 6, "ok"), node("s2-1", ids("c1"), nil, ids("c"), 6, "ok"),
		}
	}

	t.Run("healthy", func(t *testing.T) {
		got := Summarize(&topology.ClusterView{Nodes: healthy()}, desired3, nil)
		if got.SlotsAssigned != topology.NumSlots || !got.StateOK || got.OpenSlots || got.CurrentShards != 3 || got.KnownNodes != 6 || got.SlotsToMove {
			t.Errorf("%+v", got)
		}
		if len(got.Shards) != 3 || got.Shards[1].MasterPod != "s1-0" || !slices.Equal(got.Shards[1].ReplicaPods, []string{"s1-1"}) ||
			!slices.Equal(got.Shards[1].Slots, []string{"5461-10922"}) || len(got.ShortOfReplicas) != 0 {
			t.Errorf("shards %+v", got.Shards)
		}
	})

	t.Run("master died: slots uncovered, state fail, not scaling", func(t *testing.T) {
		nodes := healthy()
		nodes[0].Err = errors.New("connection refused")
		for _, n := range nodes[1:] {
			n.Info.State = "fail"
		}
		got := Summarize(&topology.ClusterView{Nodes: nodes}, desired3, nil)
		if got.SlotsAssigned != 10923 || got.StateOK || got.SlotsToMove || !slices.Equal(got.Unreachable, []string{"s0-0"}) ||
			!slices.Equal(got.ShortOfReplicas, []string{"s0"}) {
			t.Errorf("%+v", got)
		}
		if !slices.Equal(got.Unassigned, r(0, 5460)) {
			t.Errorf("unassigned %v, want 0-5460", got.Unassigned)
		}
	})

	t.Run("failed over: the new master has no reachable replica; the old one is flagged fail", func(t *testing.T) {
		nodes := healthy()
		nodes[0].Err = errors.New("i/o timeout")
		// s0-1 was promoted and took the slots; the others flag the old master fail.
		promoted := node("s0-1", ids("a1"), r(0, 5460), "", 6, "ok")
		nodes[1] = promoted
		nodes[0].ID, nodes[0].Endpoint.Addr = "", "10.0.0.1:6379" // unreachable: no ID observed
		dead := topology.NodeRecord{ID: ids("a"), IP: "10.0.0.1", Port: 6379}
		dead.Flags.Master, dead.Flags.Fail = true, true
		nodes[2].Known = append(nodes[2].Known, dead)
		got := Summarize(&topology.ClusterView{Nodes: nodes}, desired3, nil)
		if got.SlotsAssigned != topology.NumSlots || len(got.Unassigned) != 0 {
			t.Errorf("slots %d, unassigned %v", got.SlotsAssigned, got.Unassigned)
		}
		if len(got.ReplicasShort) != 1 || got.ReplicasShort["s0"] != 1 {
			t.Errorf("replicas short %v, want s0 short of 1", got.ReplicasShort)
		}
		if !slices.Equal(got.FailedNodes, []string{"s0-0"}) {
			t.Errorf("failed nodes %v, want s0-0", got.FailedNodes)
		}
	})

	t.Run("scale out: new shard, not yet met, joined-empty replica", func(t *testing.T) {
		desired := desired3
		desired.Shards = append(slices.Clone(desired.Shards), spec("s3", "s3-0", "s3-1"))
		nodes := append(healthy(),
			node("s3-0", ids("d"), nil, "", 1, "fail"), // fresh: knows only itself
			node("s3-1", ids("d1"), nil, ids("d"), 7, "ok"))
		got := Summarize(&topology.ClusterView{Nodes: nodes}, desired, nil)
		if !got.StateOK {
			t.Error("a node that has not joined yet makes cluster_state count as failed")
		}
		// Met, not yet told every slot's owner: the new master and its
		// replica report fail; no client is sent to either.
		met := append(healthy(),
			node("s3-0", ids("d"), nil, "", 8, "fail"),
			node("s3-1", ids("d1"), nil, ids("d"), 8, "fail"))
		empty := topology.NodeRecord{ID: ids("d")}
		empty.Flags.Master = true
		met[7].Known = append(met[7].Known, empty)
		if got := Summarize(&topology.ClusterView{Nodes: met}, desired, nil); !got.StateOK {
			t.Error("the new shard's nodes, outside the slot map, make cluster_state count as failed")
		}
		// A replica of a master that owns slots counts.
		owner := topology.NodeRecord{ID: ids("a"), Slots: r(0, 5460)}
		owner.Flags.Master = true
		met[1].Known = append(met[1].Known, owner)
		met[1].Info.State = "fail"
		if got := Summarize(&topology.ClusterView{Nodes: met}, desired, nil); got.StateOK {
			t.Error("a replica of a slot owner reporting fail is not counted")
		}
		if !got.SlotsToMove || got.CurrentShards != 3 {
			t.Errorf("%+v", got)
		}
	})

	t.Run("scale in: leaving shard still owns slots; open slot", func(t *testing.T) {
		nodes := healthy()
		nodes[4].Known[0].Slots = r(10923, 12000)
		nodes[4].Known[0].Migrating = map[int]string{12001: ids("a")}
		desired := desired3
		desired.Shards = desired3.Shards[:2]
		desired.Leaving = desired3.Shards[2:]
		got := Summarize(&topology.ClusterView{Nodes: nodes}, desired, &topology.Result{Message: "Next: Migrate"})
		if !got.SlotsToMove || !got.OpenSlots || got.Message != "Next: Migrate" || got.SlotsAssigned != 5461+5462+1078 {
			t.Errorf("%+v", got)
		}
	})
}
