package topology

import (
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
		if p.aliveSomewhere(id) || p.referencedByOpenSlot(id) || p.awaited(id) {
			continue
		}
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	var steps []Step
	for _, id := range sorted {
		if on := p.forgetTargets(id, nil); len(on) > 0 {
			steps = append(steps, Step{Kind: StepForget, NodeID: id, On: on,
				Reason: "failed node that owns no slots and that no endpoint carries"})
		}
	}
	return steps
}
