package topology

import (
	"slices"
)

// checkConverged records why the cluster is not yet in the desired shape once nothing is
// left to do: missing pods, replicas syncing, nodes that have not agreed on the slot map.
func (p *planner) checkConverged() {
	r := p.desired.ReplicasPerShard
	for _, sh := range p.shards {
		if len(sh.spec.Nodes) < 1+r {
			p.block(ErrNotReady, "shard %s has %d nodes, needs %d", sh.spec.Name, len(sh.spec.Nodes), 1+r)
		}
		for _, n := range sh.nodes {
			switch {
			case n.Down():
				p.waitDown([]*NodeView{n}, "shard %s", sh.spec.Name)
			case !n.Reachable():
				p.block(ErrNotReady, "node %s (%s) unreachable: %v", n.Endpoint.Name, n.Endpoint.Addr, n.Err)
			}
		}
		inSync := 0
		for _, n := range sh.nodes {
			if n.Reachable() && n.MasterID() == sh.masterID {
				if n.Replication.MasterLinkUp {
					inSync++
				} else {
					p.wait("replica %s is syncing with %s", n.Endpoint.Name, sh.master.Endpoint.Name)
				}
			}
		}
		if inSync < r && len(sh.downNodes()) == 0 {
			p.short = true
		}
		if inSync < r && len(p.blockers) == 0 {
			p.wait("shard %s has %d replicas in sync, wants %d", sh.spec.Name, inSync, r)
		}
	}
	members := p.members()
	var replicas []*NodeView
	for _, sh := range p.shards {
		for _, n := range sh.nodes {
			if n.Reachable() && n.MasterID() != "" {
				replicas = append(replicas, n)
			}
		}
	}
	for _, n := range members {
		if !n.Info.OK() {
			p.wait("%s reports cluster_state:%s", n.Endpoint.Name, n.Info.State)
			continue
		}
		if d := p.disagreement(n); d > 0 {
			p.wait("%s disagrees on the owner of %d slots", n.Endpoint.Name, d)
		}
		// Every member knows every other at its address: the anchor met them, and the rest
		// learn them by gossip, which a FORGET bans for 60 s (spec: "Removing nodes from a
		// cluster"). Until then the cluster is still forming.
		for _, o := range members {
			if o != n && !knows(n, o) {
				p.wait("%s does not know %s at %s yet", n.Endpoint.Name, o.Endpoint.Name, o.Endpoint.Addr)
				break
			}
		}
		// Every member's table records each replica of a desired shard as the replica of
		// its master: a node learns that another became a replica only from that node's own
		// packets (up to half a node timeout after CLUSTER REPLICATE), and a master whose
		// table still shows a master refuses that replica's election ("it is a master
		// node"), so a master lost meanwhile would be failed over 4 node timeouts late.
		// Leaving shards are left out: they are forgotten next, and Redis may turn an
		// emptied leaving master into a replica (cluster-allow-replica-migration).
		for _, o := range replicas {
			if r := n.Lookup(o.ID); o != n && (r == nil || !r.Flags.Replica || r.MasterID != o.MasterID()) {
				p.wait("%s does not see %s as a replica yet", n.Endpoint.Name, o.Endpoint.Name)
				break
			}
		}
	}
	// A node removed from the cluster (a replica scale-down, a pod that came back empty with
	// a new ID) is forgotten before the cluster counts as converged: until then CLUSTER
	// SLOTS may still send clients to it.
	if ids, knownBy := p.notForgotten(members); len(ids) > 0 {
		if p.aliveSomewhere(ids[0]) {
			p.wait("%s still knows node %s, which no pod carries and some node sees alive; it is forgotten once Redis flags it failed "+
				"(a node of something else that joined this cluster must be removed by hand: CLUSTER FORGET on every node)", knownBy[ids[0]], ids[0])
		} else {
			p.wait("%s still knows node %s, which no pod carries; it is forgotten once Redis flags it failed", knownBy[ids[0]], ids[0])
		}
	}
	for _, name := range p.leavingNames() {
		if !slices.Contains(p.removable(), name) {
			p.wait("leaving shard %s is not forgotten by every node yet", name)
		}
	}
}

func (a *assessment) leavingNames() []string {
	var out []string
	for _, sh := range a.leaving {
		out = append(out, sh.spec.Name)
	}
	return out
}

// disagreement counts slots whose owner in n's table differs from the consensus owner.
func (a *assessment) disagreement(n *NodeView) int {
	// A slot n's table gives to another owner than the consensus counts once, and so
	// does a slot the consensus gives an owner that n's table leaves unassigned. The
	// ranges of one table never overlap (each slot has one owner in it).
	mismatched, coveredOwned := 0, 0
	for _, r := range n.Known {
		for _, sr := range r.Slots {
			for s := sr.Start; s <= sr.End; s++ {
				if a.owner[s] != "" {
					coveredOwned++
				}
				if a.owner[s] != r.ID {
					mismatched++
				}
			}
		}
	}
	owned := 0
	for _, c := range a.slotCount {
		owned += c
	}
	return mismatched + owned - coveredOwned
}
