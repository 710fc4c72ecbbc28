package topology

import (
	"fmt"
	"sort"
)

// members are the reachable endpoints that belong in the cluster: every desired node and
// the nodes of Leaving shards that still own, claim or move slots. A leaving shard without
// slots is never a member, even while it is not drained (a node of it cannot be asked, or
// holds keys): meeting it only serves moving slots off it, and would undo a forget that
// reached some of its nodes already.
func (p *planner) members() []*NodeView {
	var out []*NodeView
	for _, sh := range p.shards {
		for _, n := range sh.nodes {
			if n.Reachable() {
				out = append(out, n)
			}
		}
	}
	for _, sh := range p.leaving {
		if _, free := p.slotsFree(sh); free {
			continue
		}
		for _, n := range sh.nodes {
			if n.Reachable() {
				out = append(out, n)
			}
		}
	}
	return out
}

// meetSteps introduces nodes the cluster does not know, or knows at a stale address. An
// anchor (the first member owning slots) meets the others; members that know a peer at an
// old address meet it directly, because gossip only corrects addresses of failing nodes.
//
// A new shard's master (a node the anchor has no record of that chooseMasters made its
// shard's master) is also met by every other slot owner already joined with the anchor:
// resharding waits until every master sees every other (readyToMove), and gossip alone
// spreads a new node at about one ping per node and second, slower still on a busy host.
// Replicas are left to gossip, which nothing waits for, so adding k shards to a cluster of m
// masters costs k·(m-1) extra meets. At bootstrap no owner has joined the anchor yet, so the
// anchor alone meets the others (n-1 meets, not n²).
func (p *planner) meetSteps() []Step {
	members := p.members()
	if len(members) < 2 {
		return nil
	}
	anchor := members[0]
	for _, n := range members {
		if n.OwnSlots().Len() > 0 {
			anchor = n
			break
		}
	}
	var joined []*NodeView // the other slot owners that know the anchor and are known by it
	for _, o := range members {
		if o != anchor && o.OwnSlots().Len() > 0 && knows(o, anchor) && knows(anchor, o) {
			joined = append(joined, o)
		}
	}
	var steps []Step
	for _, m := range members {
		if m == anchor || knows(anchor, m) || handshaking(anchor, m.Endpoint.Addr) {
			continue
		}
		isNew := anchor.Lookup(m.ID) == nil
		if isNew {
			if err := p.mergeConflict(anchor, m); err != nil {
				p.blockers = append(p.blockers, err)
				continue
			}
		}
		steps = append(steps, Step{Kind: StepMeet, Node: anchor.Endpoint.Name, Target: m.Endpoint.Name,
			Reason: fmt.Sprintf("%s does not know %s at %s", anchor.Endpoint.Name, m.Endpoint.Name, m.Endpoint.Addr)})
		sh := p.shardOf[m.Endpoint.Name]
		if !isNew || sh == nil || sh.leaving || sh.master != m {
			continue
		}
		for _, o := range joined {
			if o != m && o.Lookup(m.ID) == nil && !handshaking(o, m.Endpoint.Addr) {
				steps = append(steps, Step{Kind: StepMeet, Node: o.Endpoint.Name, Target: m.Endpoint.Name,
					Reason: fmt.Sprintf("%s is the new master of shard %s; %s meets it too, not waiting for gossip", m.Endpoint.Name, sh.spec.Name, o.Endpoint.Name)})
			}
		}
	}
	for _, a := range members {
		if a == anchor {
			continue
		}
		for _, b := range members {
			if b == a || !knows(anchor, b) || handshaking(a, b.Endpoint.Addr) {
				continue
			}
			if r := a.Lookup(b.ID); r != nil && !r.Flags.Handshake && !sameAddr(*r, b.Endpoint.Addr) {
				steps = append(steps, Step{Kind: StepMeet, Node: a.Endpoint.Name, Target: b.Endpoint.Name,
					Reason: fmt.Sprintf("%s knows %s at a stale address", a.Endpoint.Name, b.Endpoint.Name)})
			}
		}
	}
	return steps
}

// mergeConflict refuses to meet a node whose own slot claims would win over the slots the
// cluster assigns to others (a newer config epoch: it would take their slots and data).
// Claims with an older epoch are safe: the node loses them and becomes a replica, as an old
// master does when it comes back (spec: "How nodes rejoin the cluster").
//
// It also refuses a node that has live links to nodes this cluster does not know and that
// are none of the endpoints: it belongs to another running cluster (e.g. a reused volume),
// and meeting it would merge the two through gossip.
func (p *planner) mergeConflict(anchor, m *NodeView) error {
	for _, r := range m.Known {
		if r.Flags.Myself || !r.Connected || r.Failing() || r.Flags.Handshake || r.Flags.NoAddr {
			continue
		}
		if anchor.Lookup(r.ID) == nil && p.byID[r.ID] == nil {
			return fmt.Errorf("%w: %s is linked to node %s (%s), which is not part of this cluster; refusing to meet it",
				ErrConflict, m.Endpoint.Name, r.ID, r.Addr())
		}
	}
	self := m.Self()
	if self == nil || len(self.Slots) == 0 {
		return nil
	}
	own := m.OwnSlots()
	for _, r := range anchor.Known {
		if r.ID == m.ID || len(r.Slots) == 0 {
			continue
		}
		overlap := 0
		for _, sr := range r.Slots {
			for s := sr.Start; s <= sr.End; s++ {
				if own.Has(s) {
					overlap++
				}
			}
		}
		if overlap > 0 && self.ConfigEpoch >= r.ConfigEpoch {
			return fmt.Errorf("%w: %s (node %s, epoch %d) claims %d slots that the cluster assigns to node %s (epoch %d); refusing to meet it",
				ErrConflict, m.Endpoint.Name, m.ID, self.ConfigEpoch, overlap, r.ID, r.ConfigEpoch)
		}
	}
	return nil
}

// tellOwnerSteps tells each shard's master that owns no slot and reports cluster_state:fail
// which master owns the slots its table gives to nobody, one StepTellOwner per owner it
// already knows as a master (handshake done, not failing). Without it the new master learns an owner's
// slots from that owner's next ping after the handshake, up to about a second later on each
// (clusterCron pings one node a second), often after Redis's own 2 s delay before a new
// master reports ok, and resharding waits for that (readyToMove). Slots its table gives to
// some node are left to gossip and the config epochs; nothing is told while two masters
// claim a slot.
func (p *planner) tellOwnerSteps() []Step {
	if p.contested.Len() > 0 {
		return nil
	}
	owners := make([]string, 0, len(p.slotCount))
	for id := range p.slotCount {
		owners = append(owners, id)
	}
	sort.Strings(owners)
	var steps []Step
	for _, sh := range p.shards {
		m := sh.master
		if m == nil || !m.IsMaster() || m.Info.OK() || m.OwnSlots().Len() > 0 {
			continue
		}
		var assigned SlotSet
		for _, r := range m.Known {
			for _, sr := range r.Slots {
				assigned.AddRange(sr)
			}
		}
		for _, id := range owners {
			o := p.byID[id]
			if o == nil || o == m {
				continue
			}
			if r := m.Lookup(id); r == nil || r.Flags.Handshake || !r.Flags.Master || r.Failing() {
				continue // SETSLOT NODE would be refused: unknown node, or not a master
			}
			var untold []int
			for _, s := range o.OwnSlots().Slots() {
				if !assigned.Has(s) {
					untold = append(untold, s)
				}
			}
			if len(untold) > 0 {
				steps = append(steps, Step{Kind: StepTellOwner, Node: m.Endpoint.Name, NodeID: id, Slots: RangesOf(untold),
					Reason: fmt.Sprintf("%s, the new master of shard %s, does not know yet that %s owns them", m.Endpoint.Name, sh.spec.Name, o.Endpoint.Name)})
			}
		}
	}
	return steps
}
