package topology

import (
	"slices"
	"sort"
)

// forgetDeadSteps forgets node IDs that no endpoint carries any more, that own no slot and
// that every reachable node sees failed (or without address): pods that came back empty
// with a new ID, or were removed. Replicas still following such an ID are re-pointed first
// by placementSteps (a replica cannot forget its master). An ID that the tables place at the
// address of an unreachable endpoint is kept: that node crashed or hangs and comes back with
// its nodes.conf and the same ID, rejoining by itself as a replica of whoever took its slots
// (spec: "Replica election and promotion"); forgetting it would ban its ID for 60 s on every
// node and expel a node that has done nothing wrong.
func (p *planner) forgetDeadSteps() []Step {
	ids := map[string]bool{}
	for _, n := range p.reachable() {
		for _, r := range n.Known {
			if r.Flags.Myself || r.Flags.Handshake || p.byID[r.ID] != nil || p.slotCount[r.ID] > 0 {
				continue
			}
			if r.Flags.Fail || r.Flags.NoAddr {
				ids[r.ID] = true
			}
		}
	}
	var sorted []string
	for id := range ids {
		if p.forgettable(id) {
			sorted = append(sorted, id)
		}
	}
	sort.Strings(sorted)
	var steps []Step
	for _, id := range sorted {
		steps = append(steps, Step{Kind: StepForget, NodeID: id, On: p.forgetTargets(id, nil),
			Reason: "failed node that owns no slots and that no endpoint carries"})
	}
	return steps
}

// forgettable reports whether id, which no endpoint carries and which owns no slot, is a dead
// node the planner forgets once Redis flags it failed (or without address): no reachable node
// sees it alive, and it is one to forget (toForget).
func (p *planner) forgettable(id string) bool {
	return !p.aliveSomewhere(id) && p.toForget(id)
}

// toForget reports whether id, which no endpoint carries and which owns no slot, is a node
// the cluster must lose: no open slot names it, no unreachable endpoint is expected back with
// it, and some reachable node may forget it. A node just removed (its pod deleted) may still
// look alive for up to a node timeout, since its address vanished without closing its links.
func (p *planner) toForget(id string) bool {
	return !p.referencedByOpenSlot(id) && !p.awaited(id) && len(p.forgetTargets(id, nil)) > 0
}

// notForgotten returns, in ID order, the nodes that some reachable desired node's table still
// holds although no endpoint carries them, they own no slot and they are to be forgotten
// (toForget: a removed replica, a node that came back with a new ID), each with the first
// node that knows it: until Redis flags them failed and forgetDeadSteps forgets them, CLUSTER
// SLOTS may still send clients to them. toForget runs once per ID.
func (p *planner) notForgotten(members []*NodeView) (ids []string, knownBy map[string]string) {
	knownBy = map[string]string{}
	for _, n := range members {
		for _, r := range n.Known {
			if r.Flags.Myself || r.Flags.Handshake || p.byID[r.ID] != nil || p.slotCount[r.ID] > 0 {
				continue
			}
			if _, seen := knownBy[r.ID]; !seen {
				knownBy[r.ID] = n.Endpoint.Name
				ids = append(ids, r.ID)
			}
		}
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return !p.toForget(id) })
	slices.Sort(ids)
	return ids, knownBy
}
