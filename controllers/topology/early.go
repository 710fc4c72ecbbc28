package topology

// earlySlots gives the masters of a fresh cluster (Desired.Fresh: never formed, every volume
// made for it, so no node can hold slots from an earlier life) their slots and config epochs
// as soon as each is up, while other pods still start; the nodes meet only once every one is
// reachable, as before. Redis turns a master's cluster_state ok only
// min(cluster-node-timeout, 5 s) after it last counted itself in a minority of the masters,
// which a master without slots does, except in its first 2 s (clusterUpdateState,
// CLUSTER_WRITABLE_DELAY): assigned once the last pod was up, a master that started earlier
// waited those 5 s after the assignment; assigned at once, its wait runs while the others
// start, or not at all.
//
// Each shard's master is the one a bootstrap with every node up would choose: the spread
// over the pods' nodes and zones (pickSpread) among all the shard's endpoints, given the
// masters already chosen, so this needs every pod placed on a node. It gets its canonical
// block of slots (canonicalBlocks, which fillSlots gives a fresh cluster too) and epoch
// shard index + 1. A shard is left for later when its chosen endpoint is not up and
// pristine, or another of its endpoints ran (has an address) but is not reachable and
// pristine: that one could hold slots already.
func (p *planner) earlySlots() []Step {
	d := p.desired
	if !d.Fresh || d.Formed || len(d.Leaving) > 0 {
		return nil
	}
	for _, sh := range d.Shards {
		for _, ep := range sh.Nodes {
			if ep.Node == "" {
				return nil
			}
		}
	}
	blocks := canonicalBlocks(len(p.shards))
	if !p.ownBlocks(blocks) {
		// Slots assigned for another shard count (spec.shards changed meanwhile): a new
		// block could overlap them; the general fill sorts it out once every node is up.
		return nil
	}
	placed, dims, inUse := spreadDomains(d)
	var chosen []Endpoint
	var free []int // indexes into p.shards
	var options [][]Endpoint
	combinations := 1
	for i, sh := range p.shards {
		if len(sh.owners) > 0 {
			if sh.master != nil {
				chosen = append(chosen, placed[sh.master.Endpoint.Name])
			}
			continue
		}
		var cands []Endpoint
		for _, ep := range sh.spec.Nodes {
			cands = append(cands, placed[ep.Name])
		}
		free, options = append(free, i), append(options, cands)
		combinations = min(combinations*len(cands), maxSpreadCombinations+1)
	}
	pick := pickSpread(dims, inUse, chosen, options, combinations)
	var steps []Step
	for k, i := range free {
		sh := p.shards[i]
		name := options[k][pick[k]].Name
		if !p.unclaimedShard(sh.spec, name) {
			continue
		}
		steps = append(steps,
			Step{Kind: StepAddSlots, Node: name, Slots: []SlotRange{blocks[i]},
				Reason: "a fresh cluster's master gets its slots as soon as it is up"},
			Step{Kind: StepSetEpoch, Node: name, Epoch: uint64(i + 1),
				Reason: "distinct config epoch before the first meet"})
	}
	return steps
}

// unclaimedShard reports whether master, an endpoint of shard, is up and pristine and no
// other endpoint of it can hold slots: each is up and pristine, or has never run (a Down
// endpoint without an address).
func (p *planner) unclaimedShard(shard ShardSpec, master string) bool {
	for _, ep := range shard.Nodes {
		n := p.byName[ep.Name]
		switch {
		case n.Reachable() && pristine(n):
		case ep.Name != master && ep.Down != "" && ep.Addr == "":
		default:
			return false
		}
	}
	return true
}

// pristine reports whether n is a master that knows only itself, owns no slot, has none
// open, holds no key and has config epoch 0: a node as redis-server starts it on an empty
// volume.
func pristine(n *NodeView) bool {
	self := n.Self()
	return self != nil && n.IsMaster() && len(n.Known) == 1 && self.ConfigEpoch == 0 &&
		len(self.Slots) == 0 && !hasOpenSlots(n) && n.Keys == 0
}

// canonicalBlocks splits the 16384 slots into n contiguous blocks in shard order, the first
// NumSlots%n one slot larger: what a fresh cluster's shards get.
func canonicalBlocks(n int) []SlotRange {
	out := make([]SlotRange, n)
	start := 0
	for i := range out {
		size := NumSlots / n
		if i < NumSlots%n {
			size++
		}
		out[i] = SlotRange{Start: start, End: start + size - 1}
		start += size
	}
	return out
}
