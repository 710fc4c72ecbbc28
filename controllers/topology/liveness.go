package topology

// ownedBy lists the slots whose consensus owner is id, ascending.
func (a *assessment) ownedBy(id string) []int {
	if a.slotCount[id] == 0 {
		return nil
	}
	out := make([]int, 0, a.slotCount[id])
	for s := range NumSlots {
		if a.owner[s] == id {
			out = append(out, s)
		}
	}
	return out
}

// aliveSomewhere reports whether a reachable node sees id healthy (connected, no failure
// flag): then it is a live process even if it is none of our endpoints.
func (a *assessment) aliveSomewhere(id string) bool {
	for _, n := range a.reachable() {
		if r := n.Lookup(id); r != nil && !r.Flags.Myself && r.Connected && !r.Failing() && !r.Flags.Handshake && !r.Flags.NoAddr {
			return true
		}
	}
	return false
}

// awaited reports whether some reachable node's table places id at the address of an
// unreachable endpoint: the node of that endpoint is down (crashed, hung, restarting) and
// expected back with the same ID. A pod that started again on a new IP and does not answer
// yet, or is Down (not scheduled, crash-looping), cannot be matched by address: an ID that
// the tables record as a replica of the master of a shard with such an endpoint, or of a
// slot owner the engine cannot reach (a shard whose pods are down), is taken to be that
// endpoint's node. A master that failed over and whose pod was then re-created (not
// scheduled yet, or on a new IP it has not announced) leaves no such trace: a dead master ID
// without slots is awaited while an endpoint of a desired shard is unreachable at an address
// no table holds, since that pod may come back with it from its volume (nodes.conf).
func (a *assessment) awaited(id string) bool {
	for _, ep := range a.nodes {
		if ep.Reachable() {
			continue
		}
		if sh := a.shardOf[ep.Endpoint.Name]; sh != nil && !sh.leaving && !a.addrKnown(ep.Endpoint.Addr) && a.deadMaster(id) {
			return true
		}
		for _, n := range a.reachable() {
			r := n.Lookup(id)
			if r == nil {
				continue
			}
			if sameAddr(*r, ep.Endpoint.Addr) {
				return true
			}
			if r.MasterID != "" {
				sh := a.shardOf[ep.Endpoint.Name]
				if sh.masterID == r.MasterID || a.slotCount[r.MasterID] > 0 && a.byID[r.MasterID] == nil {
					return true
				}
			}
		}
	}
	return false
}

// deadMaster reports whether the reachable nodes' tables record id as a master (not
// following another node), as a master that failed over stays until it returns.
func (a *assessment) deadMaster(id string) bool {
	for _, n := range a.reachable() {
		if r := n.Lookup(id); r != nil && r.MasterID == "" {
			return true
		}
	}
	return false
}

// addrKnown reports whether some reachable node's table places a node at addr ("" for a
// pod without an IP: never).
func (a *assessment) addrKnown(addr string) bool {
	if addr == "" {
		return false
	}
	for _, n := range a.reachable() {
		for _, r := range n.Known {
			if sameAddr(r, addr) {
				return true
			}
		}
	}
	return false
}

// referencedByOpenSlot reports whether a reachable node has a slot importing from or
// migrating to id.
func (a *assessment) referencedByOpenSlot(id string) bool {
	for _, n := range a.reachable() {
		self := n.Self()
		for _, peer := range self.Migrating {
			if peer == id {
				return true
			}
		}
		for _, peer := range self.Importing {
			if peer == id {
				return true
			}
		}
	}
	return false
}
