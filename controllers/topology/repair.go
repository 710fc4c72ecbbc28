package topology

import "sort"

type openSlot struct {
	node *NodeView
	peer string // the other end's node ID
}

// repairSteps finishes or rolls back slots left importing/migrating by an interrupted
// migration, the way redis-cli --cluster fix does: a migration whose both ends are alive
// masters is finished; a migrating flag towards a node that is gone for good, or a stale
// flag on a node that does not own the slot, is cleared after moving any keys to the owner.
//
// A migration whose destination is now a replica (it failed over to its replica, by Redis's
// election or CLUSTER FAILOVER) is re-targeted to the master that node replicates: the keys
// already moved are there (MIGRATE's RESTORE replicates), so the move continues into it
// (StepMigrate sets IMPORTING on it and MIGRATING towards it) and no key is left behind on
// either side. When that master is the source itself, the flag is just cleared: the old
// destination's keys are a copy of the source's. Open flags held by a replica are left
// alone: Redis 7.0 clears them when a master turns into a replica and refuses SETSLOT on
// replicas ("Please use SETSLOT only with masters", seen with redis-server 7.0.15).
func (p *planner) repairSteps() []Step {
	migr := map[int][]openSlot{}
	imp := map[int][]openSlot{}
	var slots []int
	seen := map[int]bool{}
	note := func(s int) {
		if !seen[s] {
			seen[s] = true
			slots = append(slots, s)
		}
	}
	for _, n := range p.reachable() {
		if !n.IsMaster() {
			continue
		}
		self := n.Self()
		for s, peer := range self.Migrating {
			migr[s] = append(migr[s], openSlot{n, peer})
			note(s)
		}
		for s, peer := range self.Importing {
			imp[s] = append(imp[s], openSlot{n, peer})
			note(s)
		}
	}
	if len(slots) == 0 {
		return nil
	}
	sort.Ints(slots)
	type key struct {
		kind         StepKind
		node, target string
	}
	grouped := map[key][]int{}
	var order []key
	add := func(k key, s int) {
		if _, ok := grouped[k]; !ok {
			order = append(order, k)
		}
		grouped[k] = append(grouped[k], s)
	}
	ownerName := func(s int) (string, bool) {
		if n := p.byID[p.owner[s]]; n != nil {
			return n.Endpoint.Name, true
		}
		return "", false
	}
	for _, s := range slots {
		var resumed *openSlot // the migration this slot will finish
		for _, m := range migr[s] {
			if !m.node.OwnSlots().Has(s) {
				owner, ok := ownerName(s)
				if !ok && m.node.Keys > 0 {
					p.block(ErrNotReady, "slot %d: %s is migrating it without owning it and its owner is unreachable", s, m.node.Endpoint.Name)
					continue
				}
				add(key{StepStabilize, m.node.Endpoint.Name, owner}, s)
				continue
			}
			dst := p.byID[m.peer]
			if dst != nil && !dst.IsMaster() {
				switch m2 := p.byID[dst.MasterID()]; {
				case m2 == m.node:
					add(key{StepStabilize, m.node.Endpoint.Name, ""}, s)
					continue
				case m2 != nil && m2.IsMaster():
					dst = m2 // re-target to the master of the destination's shard
				default:
					p.block(ErrNotReady, "slot %d is migrating from %s to %s, now a replica of node %s, which is unreachable",
						s, m.node.Endpoint.Name, dst.Endpoint.Name, dst.MasterID())
					continue
				}
			}
			switch {
			case dst != nil && dst.IsMaster() && resumed == nil && !(dst.Info.OK() && m.node.Info.OK()):
				// A restarted end refuses RESTORE with CLUSTERDOWN until it has rejoined.
				p.wait("slot %d: waiting for %s and %s to report cluster_state:ok before finishing its migration", s, m.node.Endpoint.Name, dst.Endpoint.Name)
			case dst != nil && dst.IsMaster() && resumed == nil:
				resumed = &openSlot{m.node, dst.ID}
				add(key{StepMigrate, m.node.Endpoint.Name, dst.Endpoint.Name}, s)
			case dst == nil && p.allReachable && !p.aliveSomewhere(m.peer):
				add(key{StepStabilize, m.node.Endpoint.Name, ""}, s)
			default:
				p.block(ErrNotReady, "slot %d is migrating from %s to node %s, which is unreachable", s, m.node.Endpoint.Name, m.peer)
			}
		}
		for _, im := range imp[s] {
			if resumed != nil && im.node.ID == resumed.peer && im.peer == resumed.node.ID {
				continue // the resumed migration closes it
			}
			src := p.byID[im.peer]
			if resumed == nil && src != nil && src.OwnSlots().Has(s) && im.node.IsMaster() && p.owner[s] == src.ID {
				if !(src.Info.OK() && im.node.Info.OK()) {
					p.wait("slot %d: waiting for %s and %s to report cluster_state:ok before finishing its migration", s, src.Endpoint.Name, im.node.Endpoint.Name)
					continue
				}
				resumed = &openSlot{src, im.node.ID}
				add(key{StepMigrate, src.Endpoint.Name, im.node.Endpoint.Name}, s)
				continue
			}
			owner, ok := ownerName(s)
			if !ok {
				p.block(ErrNotReady, "slot %d: %s is importing it and its owner is unreachable", s, im.node.Endpoint.Name)
				continue
			}
			if owner == im.node.Endpoint.Name {
				owner = ""
			}
			add(key{StepStabilize, im.node.Endpoint.Name, owner}, s)
		}
	}
	var steps []Step
	for _, k := range order { // stabilize before migrate so stray keys reach the owner first
		if k.kind == StepStabilize {
			steps = append(steps, Step{Kind: k.kind, Node: k.node, Target: k.target, Slots: RangesOf(grouped[k]),
				Reason: "roll back an open slot that cannot be finished"})
		}
	}
	for _, k := range order {
		if k.kind == StepMigrate {
			steps = append(steps, Step{Kind: k.kind, Node: k.node, Target: k.target, Slots: RangesOf(grouped[k]),
				Reason: "finish an interrupted migration"})
		}
	}
	return steps
}
