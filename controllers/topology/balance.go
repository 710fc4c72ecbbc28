package topology

import (
	"errors"
	"fmt"
	"sort"
)

// involvedMasters are the desired masters and every other reachable owner of slots.
func (p *planner) involvedMasters() ([]*NodeView, bool) {
	var out []*NodeView
	seen := map[string]bool{}
	ok := true
	for _, sh := range p.shards {
		if sh.master == nil && sh.masterID == "" && len(sh.downNodes()) > 0 {
			// A shard owning no slots whose pods are down: it receives none until they run
			// (balanceSteps says so), and the other shards move on.
			continue
		}
		if sh.master == nil {
			// Pods not up yet, or every node of the shard replicates another shard: nothing
			// Redis resolves by itself.
			p.block(ErrNotReady, "shard %s has no reachable master nor an empty master to promote", sh.spec.Name)
			ok = false
			continue
		}
		out = append(out, sh.master)
		seen[sh.masterID] = true
	}
	var owners []string
	for id := range p.slotCount {
		owners = append(owners, id)
	}
	sort.Strings(owners)
	for _, id := range owners {
		if seen[id] {
			continue
		}
		n := p.byID[id]
		if n == nil {
			p.wait("slot owner %s is unreachable", id)
			ok = false
			continue
		}
		out = append(out, n)
	}
	return out, ok
}

// readyToMove holds resharding until the masters involved are healthy and know each other:
// SETSLOT IMPORTING/MIGRATING/NODE need the peer in the receiver's table.
func (p *planner) readyToMove() bool {
	masters, ok := p.involvedMasters()
	if !ok {
		return false
	}
	if p.contested.Len() > 0 {
		p.wait("%d slots are claimed by two masters; waiting for the config epochs to settle", p.contested.Len())
		return false
	}
	for _, m := range masters {
		if !m.IsMaster() {
			p.wait("%s is not a master yet", m.Endpoint.Name)
			return false
		}
		if !m.Info.OK() {
			p.wait("%s reports cluster_state:%s", m.Endpoint.Name, m.Info.State)
			return false
		}
		for _, o := range masters {
			if o == m {
				continue
			}
			if r := m.Lookup(o.ID); r == nil || r.Flags.Handshake || !r.Flags.Master || r.Failing() {
				p.wait("%s does not see master %s yet", m.Endpoint.Name, o.Endpoint.Name)
				return false
			}
		}
	}
	return true
}

// balanceSteps moves the fewest slots that reach the even split: slots of Leaving shards and
// of extra masters all move; a desired master over its target gives its highest slots; the
// receivers fill in shard order. A shard with a Down node receives nothing until it runs
// (waitDown), nor one whose master has NoSlots (ErrNotReady); the others still get their
// share.
func (p *planner) balanceSteps() []Step {
	targets := p.evenTargets()
	type donor struct {
		id    string
		slots []int
	}
	var donors []donor
	isMaster := map[string]bool{}
	for _, sh := range p.shards {
		isMaster[sh.masterID] = true
	}
	var extra []string
	for id := range p.slotCount {
		if !isMaster[id] {
			extra = append(extra, id)
		}
	}
	// Leaving shards first, then extra masters of desired shards, by shard order then ID.
	sort.Slice(extra, func(i, j int) bool {
		si, sj := p.ownerOf[extra[i]], p.ownerOf[extra[j]]
		ki, kj := shardSortKey(si), shardSortKey(sj)
		if ki != kj {
			return ki < kj
		}
		return extra[i] < extra[j]
	})
	for _, id := range extra {
		donors = append(donors, donor{id, p.ownedBy(id)})
	}
	type receiver struct {
		shard *shardState
		need  int
	}
	var receivers []*receiver
	for i, sh := range p.shards {
		switch c := p.slotCount[sh.masterID]; {
		case c > targets[i]:
			donors = append(donors, donor{sh.masterID, p.ownedBy(sh.masterID)[targets[i]:]})
		case c < targets[i] && len(sh.downNodes()) > 0:
			// Keys moved onto a shard whose pod is down would live with less redundancy
			// than where they are (or nowhere, for a master that does not run): the shard
			// receives its slots once its pods run.
			p.waitDown(sh.downNodes(), "shard %s receives %d slots", sh.spec.Name, targets[i]-c)
		case c < targets[i] && sh.master != nil && sh.master.Endpoint.NoSlots != "":
			p.block(ErrNotReady, "shard %s receives %d slots once clients can be sent to %s: %s",
				sh.spec.Name, targets[i]-c, sh.master.Endpoint.Name, sh.master.Endpoint.NoSlots)
		case c < targets[i] && sh.master != nil && p.hostnameUnknown(sh.master) != "":
			p.block(ErrNotReady, "shard %s receives %d slots once every node knows %s's address %s (%s does not yet)",
				sh.spec.Name, targets[i]-c, sh.master.Endpoint.Name, sh.master.Endpoint.Hostname, p.hostnameUnknown(sh.master))
		case c < targets[i]:
			receivers = append(receivers, &receiver{sh, targets[i] - c})
		}
	}
	var steps []Step
	r := 0
	for _, d := range donors {
		rest := d.slots
		for len(rest) > 0 && r < len(receivers) {
			rc := receivers[r]
			k := min(rc.need, len(rest))
			chunk := rest[:k]
			rest = rest[k:]
			rc.need -= k
			from := p.byID[d.id]
			steps = append(steps, Step{Kind: StepMigrate, Node: from.Endpoint.Name, Target: rc.shard.master.Endpoint.Name,
				Slots: RangesOf(chunk), Reason: fmt.Sprintf("rebalance %d slots to shard %s", k, rc.shard.spec.Name)})
			if rc.need == 0 {
				r++
			}
		}
	}
	return steps
}

// hostnameUnknown names a reachable node (m itself included) whose table does not show m
// under m.Endpoint.Hostname yet; "" when every one does, or m announces none.
func (p *planner) hostnameUnknown(m *NodeView) string {
	if m.Endpoint.Hostname == "" {
		return ""
	}
	for _, n := range p.reachable() {
		if r := n.Lookup(m.ID); r == nil || r.Hostname != m.Endpoint.Hostname {
			return n.Endpoint.Name
		}
	}
	return ""
}

// shardSortKey orders Leaving shards first, then desired shards, then unknown owners.
func shardSortKey(sh *shardState) int {
	switch {
	case sh == nil:
		return 1 << 30
	case sh.leaving:
		return sh.index
	default:
		return 1<<20 + sh.index
	}
}

// forgetLeavingSteps forgets the nodes of drained Leaving shards on every other node, all
// at once so the 60 s ban of CLUSTER FORGET covers the whole round. A shard without slots
// whose nodes still hold keys, or cannot be asked, blocks with the reason.
func (p *planner) forgetLeavingSteps() []Step {
	var steps []Step
	for _, sh := range p.leaving {
		ids, free := p.slotsFree(sh)
		if !free {
			continue
		}
		var loading loadingError
		if err := p.keysLeft(sh); errors.As(err, &loading) {
			p.wait("%s", loading)
			continue
		} else if err != nil {
			p.blockers = append(p.blockers, err)
			continue
		}
		for _, id := range ids {
			if on := p.forgetTargets(id, sh); len(on) > 0 {
				steps = append(steps, Step{Kind: StepForget, NodeID: id, On: on,
					Reason: fmt.Sprintf("leaving shard %s owns no slots and holds no keys", sh.spec.Name)})
			}
		}
	}
	return steps
}

// removable lists Leaving shards that are drained and that no other reachable node knows.
func (a *assessment) removable() []string {
	var out []string
	for _, sh := range a.leaving {
		ids, ok := a.drained(sh)
		if !ok {
			continue
		}
		known := false
		for _, id := range ids {
			if len(a.forgetTargets(id, sh)) > 0 {
				known = true
			}
			for _, n := range a.reachable() {
				if a.shardOf[n.Endpoint.Name] != sh && n.MasterID() == id {
					known = true
				}
			}
		}
		if !known {
			out = append(out, sh.spec.Name)
		}
	}
	return out
}
