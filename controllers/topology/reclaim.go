package topology

import (
	"fmt"
	"slices"
)

// reclaimSteps gives back slots that a reachable master no longer claims in its own table
// while every other reachable table that names an owner for them names that master: the
// slot lost its owner in one place only, the owner's own view. Seen on Redis 7.0 while
// moving a leaving master's last slots, most likely because the target had kept an "owner
// not claiming" mark on the slot (announce, TestRedisKeepsStaleOwnerMark): the source's last
// claim took the slot back, the emptied source turned into the target's replica and was
// forgotten. The others kept the target as its owner, and gossip never tells a node about
// its own slots, so the target reported cluster_state:fail (CLUSTERDOWN for all its slots)
// until someone assigned the slot again. Without this phase the slot is unowned: a new
// cluster's fill hands it to whichever shard is short, and a formed cluster reports it lost
// and waits for a person. Keys the owner still holds in it stay (Redis deleted those the
// stale claim found); keys of it on any other master make the step refuse (checkNoKeys).
func (p *planner) reclaimSteps(unassigned []int) []Step {
	var open SlotSet
	for _, s := range unassigned {
		open.Add(s)
	}
	// named[s] holds the owners the reachable tables give slot s.
	named := map[int][]string{}
	for _, n := range p.reachable() {
		for _, r := range n.Known {
			if r.Flags.Myself || !r.Flags.Master || len(r.Slots) == 0 {
				continue
			}
			for _, sr := range r.Slots {
				for s := sr.Start; s <= sr.End; s++ {
					if open.Has(s) && !slices.Contains(named[s], r.ID) {
						named[s] = append(named[s], r.ID)
					}
				}
			}
		}
	}
	give := map[string][]int{}
	var owners []string
	for _, s := range unassigned {
		if len(named[s]) != 1 {
			continue
		}
		id := named[s][0]
		if m := p.byID[id]; m == nil || !m.IsMaster() {
			continue
		}
		if give[id] == nil {
			owners = append(owners, id)
		}
		give[id] = append(give[id], s)
	}
	var steps []Step
	for _, id := range owners {
		m := p.byID[id]
		steps = append(steps, Step{Kind: StepReclaim, Node: m.Endpoint.Name, Slots: RangesOf(give[id]),
			Reason: fmt.Sprintf("the other nodes' tables name %s the owner of %d slots its own table lost", m.Endpoint.Name, len(give[id]))})
	}
	return steps
}
