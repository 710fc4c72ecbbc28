package topology

import (
	"fmt"
)

// placementSteps makes every other node of a desired shard replicate that shard's master.
func (p *planner) placementSteps() []Step {
	var steps []Step
	for _, sh := range p.shards {
		if sh.master == nil || !sh.master.IsMaster() {
			continue
		}
		for _, n := range sh.nodes {
			if !n.Reachable() || n.ID == sh.masterID {
				continue
			}
			if n.MasterID() == sh.masterID {
				if s, ok := p.repointStep(sh, n); ok {
					steps = append(steps, s)
				}
				continue
			}
			if n.IsMaster() {
				if n.OwnSlots().Len() > 0 || p.slotCount[n.ID] > 0 || hasOpenSlots(n) {
					continue // an extra master of the shard: balanceSteps drains it first
				}
				if n.Keys > 0 {
					p.wait("%s is a master without slots that still holds %d keys", n.Endpoint.Name, n.Keys)
					continue
				}
			}
			if r := n.Lookup(sh.masterID); r == nil || r.Flags.Handshake || !r.Flags.Master {
				p.wait("%s does not know master %s yet", n.Endpoint.Name, sh.master.Endpoint.Name)
				continue
			}
			steps = append(steps, Step{Kind: StepReplicate, Node: n.Endpoint.Name, NodeID: sh.masterID,
				Reason: fmt.Sprintf("replica of shard %s follows master %s", sh.spec.Name, sh.master.Endpoint.Name)})
		}
	}
	return steps
}

// repointStep re-attaches replica n, which follows its shard's master in the cluster
// table, when its replication still connects to an address the master no longer has
// (INFO replication master_host:master_port): after every node of a cluster restarted on
// new addresses, Redis 7.0.15 updates a master's address from gossip but leaves the
// replica's replication on the old one, so the link stays down for good. CLUSTER
// REPLICATE with the same master points replication at the address the replica's table
// holds, so it runs only once that table has the master at its endpoint address.
func (p *planner) repointStep(sh *shardState, n *NodeView) (Step, bool) {
	ri := n.Replication
	if ri.MasterLinkUp || ri.MasterAddr == "" || sh.master == nil || addrEqual(ri.MasterAddr, sh.master.Endpoint.Addr) {
		return Step{}, false
	}
	if !knows(n, sh.master) {
		p.wait("%s does not know master %s at %s yet", n.Endpoint.Name, sh.master.Endpoint.Name, sh.master.Endpoint.Addr)
		return Step{}, false
	}
	return Step{Kind: StepReplicate, Node: n.Endpoint.Name, NodeID: sh.masterID,
		Reason: fmt.Sprintf("replica of shard %s replicates from %s, an old address of master %s (now %s)",
			sh.spec.Name, ri.MasterAddr, sh.master.Endpoint.Name, sh.master.Endpoint.Addr)}, true
}
