package status

import (
	"slices"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// outsideSlotMap reports whether n, whose own entry is self, is a master
// that owns no slot or a replica of a master that owns none in n's table.
func outsideSlotMap(n *topology.NodeView, self *topology.NodeRecord) bool {
	if len(self.Slots) > 0 {
		return false
	}
	if self.Flags.Master {
		return true
	}
	m := n.Lookup(self.MasterID)
	return m != nil && len(m.Slots) == 0
}

// Summarize reduces a view of desired, and the engine's Result when it ran
// (nil otherwise: the shards then come from topology.Shards, the same
// master selection), to what the status and the metrics need. A nil view
// gives only the Result's verdict, with StateOK true.
func Summarize(view *topology.ClusterView, desired topology.Desired, res *topology.Result) *Topology {
	t := &Topology{StateOK: true}
	if res != nil {
		t.Converged, t.Message, t.DataLoss = res.Converged, res.Message, res.DataLoss
	}
	if view == nil {
		return t
	}
	var assigned topology.SlotSet
	masters := map[string]bool{}
	reachable := 0
	for _, n := range view.Nodes {
		if !n.Reachable() {
			t.Unreachable = append(t.Unreachable, n.Endpoint.Name)
			continue
		}
		self := n.Self()
		t.KnownNodes = max(t.KnownNodes, n.Info.KnownNodes)
		if self == nil {
			continue
		}
		// A node outside the slot map (a master that owns no slot, or a
		// replica of one, as it knows it: the new pods of a scale-out until
		// their shard receives slots) reports cluster_state:fail until it
		// has learnt every slot's owner; no client is sent to it, so that
		// says nothing about the cluster.
		if outsideSlotMap(n, self) {
			continue
		}
		reachable++
		if !n.Info.OK() {
			t.StateOK = false
		}
		if len(self.Importing) > 0 || len(self.Migrating) > 0 {
			t.OpenSlots = true
		}
		if n.IsMaster() {
			own := n.OwnSlots()
			if own.Len() > 0 {
				masters[n.ID] = true
				for _, slot := range own.Slots() {
					assigned.Add(slot)
				}
			}
		}
	}
	if reachable == 0 {
		t.StateOK = false
	}
	t.SlotsAssigned = assigned.Len()
	t.CurrentShards = len(masters)
	var unassigned topology.SlotSet
	for slot := range topology.NumSlots {
		if !assigned.Has(slot) {
			unassigned.Add(slot)
		}
	}
	t.Unassigned = unassigned.Ranges()
	t.FailedNodes = failedNodes(view)

	var shards []topology.ShardStatus
	if res != nil {
		shards = res.Shards
	} else {
		shards = topology.Shards(view, desired)
	}
	for _, sh := range shards {
		if len(sh.ReplicaNames) < desired.ReplicasPerShard {
			t.ShortOfReplicas = append(t.ShortOfReplicas, sh.Name)
			if len(sh.SlotRanges) > 0 {
				if t.ReplicasShort == nil {
					t.ReplicasShort = map[string]int{}
				}
				t.ReplicasShort[sh.Name] = desired.ReplicasPerShard - len(sh.ReplicaNames)
			}
		}
		t.Shards = append(t.Shards, cachev1beta1.ShardStatus{
			Name:         sh.Name,
			MasterPod:    sh.MasterName,
			MasterNodeID: sh.MasterNodeID,
			ReplicaPods:  sh.ReplicaNames,
			Slots:        sh.SlotRanges,
		})
	}
	// Slots must move when a desired shard is new (it has reachable nodes,
	// none owning slots or following a master that owns or owned some: not
	// a shard whose master just died) or a leaving shard still owns some.
	for _, spec := range desired.Shards {
		reached, member := 0, false
		for _, ep := range spec.Nodes {
			if n := view.Node(ep.Name); n.Reachable() {
				reached++
				member = member || ownsSlots(n) || followsOwner(view, n)
			}
		}
		if reached > 0 && !member {
			t.SlotsToMove = true
		}
	}
	for _, l := range desired.Leaving {
		for _, ep := range l.Nodes {
			if n := view.Node(ep.Name); n.IsMaster() && ownsSlots(n) {
				t.SlotsToMove = true
			}
		}
	}
	return t
}

// failedNodes names the nodes that some reachable node flags fail (the
// cluster spec's FAIL: a majority of masters agreed), by pod name when
// known (podOfRecord). Sorted.
func failedNodes(view *topology.ClusterView) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range view.Nodes {
		if !n.Reachable() {
			continue
		}
		for _, rec := range n.Known {
			if !rec.Flags.Fail || seen[rec.ID] {
				continue
			}
			seen[rec.ID] = true
			out = append(out, podOfRecord(view, rec))
		}
	}
	slices.Sort(out)
	return out
}

// podOfRecord names the endpoint a node record is about: the one that
// answers with its node ID, else an unreachable one at its address (it
// cannot say who it is; likely the failed node itself); else the record's
// node ID and address (a node whose pod is gone, or runs a new node).
func podOfRecord(view *topology.ClusterView, rec topology.NodeRecord) string {
	addr := rec.Addr()
	for _, n := range view.Nodes {
		if n.Reachable() && n.ID == rec.ID {
			return n.Endpoint.Name
		}
	}
	for _, n := range view.Nodes {
		if !n.Reachable() && addr != "" && n.Endpoint.Addr == addr {
			return n.Endpoint.Name
		}
	}
	if addr != "" {
		return rec.ID + " (" + addr + ")"
	}
	return rec.ID
}

func ownsSlots(n *topology.NodeView) bool {
	own := n.OwnSlots()
	return own.Len() > 0
}

// followsOwner reports whether n replicates a master that owns slots, or
// one it cannot see (a master that died: its slots are still the shard's).
func followsOwner(view *topology.ClusterView, n *topology.NodeView) bool {
	id := n.MasterID()
	if id == "" {
		return false
	}
	m := view.NodeByID(id)
	return m == nil || ownsSlots(m)
}
