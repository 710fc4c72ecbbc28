package topology

import (
	"fmt"
)

// fillSlots assigns unowned slots to the desired masters (bootstrap, or slots freed after a
// lost shard was accepted). On a fresh cluster it also gives each master a distinct config
// epoch before the first MEET, as redis-cli --cluster create does. In a cluster that was
// formed before (Desired.Formed) unowned slots held data: they are reported lost instead,
// unless AllowDataLoss is set. Slots the tables still give to a reachable master that lost
// them from its own table go back to it first (reclaim.go).
func (p *planner) fillSlots() []Step {
	var unassigned []int
	for s := range NumSlots {
		if p.owner[s] == "" {
			unassigned = append(unassigned, s)
		}
	}
	if len(unassigned) == 0 {
		return nil
	}
	if steps := p.reclaimSteps(unassigned); len(steps) > 0 { // reclaim.go
		return steps
	}
	if !p.allReachable {
		p.block(ErrNotReady, "%d slots have no owner; waiting for every node to be reachable before assigning them", len(unassigned))
		return nil
	}
	// Either no node has met another yet (bootstrap), or every member knows every other:
	// only then is "nobody claims it" true cluster-wide rather than a gap in one node's view.
	isolated, joined := true, true
	members := p.members()
	for _, n := range members {
		if len(n.Known) != 1 {
			isolated = false
		}
		for _, o := range members {
			if o != n && !knows(n, o) {
				joined = false
			}
		}
	}
	if !isolated && !joined {
		return nil
	}
	if p.desired.Formed && !p.desired.AllowDataLoss {
		p.lostUnowned(unassigned)
		return nil
	}
	for _, sh := range p.shards {
		if sh.master == nil {
			p.block(ErrNotReady, "shard %s has no node that can be its master", sh.spec.Name)
			return nil
		}
	}
	give := make([][]int, len(p.shards))
	if blocks := canonicalBlocks(len(p.shards)); isolated && p.desired.Fresh && p.ownBlocks(blocks) {
		// The blocks early.go gives the masters that were up first: every shard gets its
		// own, whichever came first.
		for i, b := range blocks {
			if p.slotCount[p.shards[i].masterID] == 0 {
				give[i] = expand([]SlotRange{b})
			}
		}
		return p.addSlotSteps(give)
	}
	targets := p.evenTargets()
	count := make([]int, len(p.shards))
	for i, sh := range p.shards {
		count[i] = p.slotCount[sh.masterID]
	}
	next := 0
	for i := range p.shards {
		for count[i] < targets[i] && next < len(unassigned) {
			give[i] = append(give[i], unassigned[next])
			count[i]++
			next++
		}
	}
	for ; next < len(unassigned); next++ { // more free slots than deficits: least loaded first
		best := 0
		for i := range count {
			if count[i] < count[best] {
				best = i
			}
		}
		give[best] = append(give[best], unassigned[next])
		count[best]++
	}
	return p.addSlotSteps(give)
}

// ownBlocks reports whether every shard's master that owns slots owns exactly its block.
func (p *planner) ownBlocks(blocks []SlotRange) bool {
	for i, sh := range p.shards {
		if p.slotCount[sh.masterID] == 0 {
			continue
		}
		if sh.master == nil {
			return false
		}
		if own := sh.master.OwnSlots().Ranges(); len(own) != 1 || own[0] != blocks[i] {
			return false
		}
	}
	return true
}

// addSlotSteps assigns give[i] to shard i's master, with its config epoch (i + 1) when it
// has met no other node yet.
func (p *planner) addSlotSteps(give [][]int) []Step {
	var steps []Step
	for i, sh := range p.shards {
		if len(give[i]) == 0 {
			continue
		}
		steps = append(steps, Step{Kind: StepAddSlots, Node: sh.master.Endpoint.Name, Slots: RangesOf(give[i]),
			Reason: fmt.Sprintf("assign %d unowned slots to shard %s", len(give[i]), sh.spec.Name)})
		if self := sh.master.Self(); len(sh.master.Known) == 1 && self.ConfigEpoch == 0 {
			steps = append(steps, Step{Kind: StepSetEpoch, Node: sh.master.Endpoint.Name, Epoch: uint64(i + 1),
				Reason: "distinct config epoch before the first meet"})
		}
	}
	return steps
}
