package topology

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// StepKind names what a Step does.
type StepKind string

// Step kinds. Each step is idempotent: running it again after it succeeded, or after a crash
// half-way, is safe.
const (
	// StepAddSlots: CLUSTER ADDSLOTSRANGE Slots on Node (slots nobody owns; spec: "Hash slots
	// configuration propagation").
	StepAddSlots StepKind = "AddSlots"
	// StepSetEpoch: CLUSTER SET-CONFIG-EPOCH Epoch on a fresh master, before it meets others,
	// so masters start with distinct epochs (spec: "configEpoch conflicts resolution").
	StepSetEpoch StepKind = "SetConfigEpoch"
	// StepMeet: CLUSTER MEET from Node to Target's address (spec: "Node handshake").
	StepMeet StepKind = "Meet"
	// StepReplicate: CLUSTER REPLICATE NodeID on Node.
	StepReplicate StepKind = "Replicate"
	// StepMigrate: move Slots from master Node to master Target with SETSLOT IMPORTING,
	// SETSLOT MIGRATING, GETKEYSINSLOT + MIGRATE ... KEYS, SETSLOT NODE (spec: "Live
	// resharding"); resumes a half-done move.
	StepMigrate StepKind = "Migrate"
	// StepStabilize: move Node's keys in Slots to Target (the owner) if any, then CLUSTER
	// SETSLOT STABLE on Node: rolls back an open slot that cannot be finished.
	StepStabilize StepKind = "Stabilize"
	// StepForget: CLUSTER FORGET NodeID on every node in On, at once, inside the 60 s ban
	// (spec: "Removing nodes from a cluster"). The executor refuses to forget a node that
	// still owns slots unless Option is ForgetDataLoss.
	StepForget StepKind = "Forget"
	// StepFailover: CLUSTER FAILOVER Option on replica Node (spec: "Replica election and
	// promotion"). Planned only as TAKEOVER, when the master is unreachable and no majority
	// of the slot-owning masters is alive to elect a replica.
	StepFailover StepKind = "Failover"
	// StepWait: nothing to send; Redis is converging by itself (gossip, failover, sync).
	StepWait StepKind = "Wait"
)

// ForgetDataLoss is the Option of a Forget step that drops the dead owner of a lost shard's
// slots, planned only when Desired.AllowDataLoss is set.
const ForgetDataLoss = "DATALOSS"

// Step is one typed action of a plan. Node and Target are endpoint names.
type Step struct {
	Kind   StepKind
	Node   string
	Target string
	NodeID string
	On     []string
	Slots  []SlotRange
	Epoch  uint64
	Option string
	Reason string
}

// String is a compact human description, e.g. "Migrate 0-1364 a-0 -> d-0".
func (s Step) String() string {
	var b strings.Builder
	b.WriteString(string(s.Kind))
	if len(s.Slots) > 0 {
		fmt.Fprintf(&b, " %s", FormatRanges(s.Slots))
	}
	if s.Node != "" {
		fmt.Fprintf(&b, " %s", s.Node)
	}
	if s.Target != "" {
		fmt.Fprintf(&b, " -> %s", s.Target)
	}
	if s.NodeID != "" {
		fmt.Fprintf(&b, " %s", s.NodeID)
	}
	if len(s.On) > 0 {
		fmt.Fprintf(&b, " on %s", strings.Join(s.On, ","))
	}
	if s.Epoch != 0 {
		fmt.Fprintf(&b, " epoch %d", s.Epoch)
	}
	if s.Option != "" {
		fmt.Fprintf(&b, " %s", s.Option)
	}
	if s.Kind == StepWait && s.Reason != "" {
		fmt.Fprintf(&b, ": %s", s.Reason)
	}
	return b.String()
}

// Plan is a pure, deterministic function from one observation and the desired shape to the
// steps that should run now. It works in phases and returns the first phase with work:
//
//  1. slots nobody owns are assigned (bootstrap, or after a lost shard was accepted), with
//     distinct config epochs on a fresh cluster; in a cluster formed before (Desired.Formed)
//     they are reported lost (ErrShardLost) unless AllowDataLoss is set;
//  2. CLUSTER MEET for nodes missing from the cluster or known at a stale address (after a
//     restart on a new IP; spec: "Node handshake");
//  3. open slots are repaired: finished when both ends are alive, else rolled back, as
//     redis-cli --cluster fix does; a move whose destination failed over to its replica
//     is finished into the shard's new master;
//  4. node IDs that failed and own no slots are forgotten on every node;
//  5. a lost shard is reported (ErrShardLost) or, with AllowDataLoss, its dead owner forgotten
//     so its slots can be re-assigned; an unreachable master is left to Redis's own election
//     while a majority of masters can vote, and forced (TAKEOVER) only when none can;
//  6. replicas are attached to their shard's master (CLUSTER REPLICATE), before that master
//     receives slots (spec: "Replica migration" would otherwise move replicas around);
//  7. slots move to reach an even split with the fewest moves (spec: "Live resharding");
//  8. drained Leaving shards are forgotten everywhere (spec: "Removing nodes from a
//     cluster").
//
// A Wait step means Redis is converging by itself. The error reports what blocks convergence
// beyond the returned steps (ErrNotReady, ErrShardLost, ErrConflict, ErrInvalidDesired);
// steps may accompany it. No steps and no error: converged.
func Plan(view *ClusterView, desired Desired) ([]Step, error) {
	if err := desired.Validate(); err != nil {
		return nil, err
	}
	if view == nil {
		return nil, fmt.Errorf("%w: no observation", ErrNotReady)
	}
	_, steps, err := plan(view, desired)
	return steps, err
}

type planner struct {
	*assessment
	blockers []error
	waits    []string
	lost     *LostShard
	// downBlocks counts the blockers that only wait for Down nodes (waitDown), and
	// waitingFor names those nodes, in order.
	downBlocks int
	waitingFor []string
	// short: a shard without Down nodes has fewer replicas in sync than wanted.
	short bool
}

func (p *planner) block(sentinel error, format string, args ...any) {
	p.blockers = append(p.blockers, fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...)))
}

func (p *planner) wait(format string, args ...any) {
	p.waits = append(p.waits, fmt.Sprintf(format, args...))
}

func (p *planner) err() error { return errors.Join(p.blockers...) }

func (p *planner) plan() ([]Step, error) {
	if len(p.reachable()) == 0 {
		p.block(ErrNotReady, "no node is reachable")
		return nil, p.err()
	}
	if !p.allReachable && len(p.slotCount) == 0 {
		// A cluster not formed yet is formed with every node at once: the masters get their
		// distinct config epochs before the first MEET, and no node that may hold slots
		// from an earlier life is left out.
		p.block(ErrNotReady, "%d slots have no owner; waiting for every node to be reachable before assigning them", NumSlots)
		return nil, p.err()
	}
	phases := []func() []Step{
		p.fillSlots,
		p.meetSteps,
		p.repairSteps,
		p.forgetDeadSteps,
		p.orphanSteps,
		p.placementSteps,
	}
	for _, phase := range phases {
		if steps := phase(); len(steps) > 0 {
			return steps, p.err()
		}
	}
	if len(p.waits) > 0 {
		return []Step{{Kind: StepWait, Reason: p.waits[0]}}, p.err()
	}
	if len(p.blockers) > 0 {
		return nil, p.err()
	}
	if !p.readyToMove() {
		if len(p.waits) == 0 {
			return nil, p.err()
		}
		return []Step{{Kind: StepWait, Reason: p.waits[0]}}, p.err()
	}
	if steps := p.balanceSteps(); len(steps) > 0 {
		return steps, nil
	}
	if steps := p.forgetLeavingSteps(); len(steps) > 0 {
		return steps, nil
	}
	p.checkConverged()
	if len(p.waits) > 0 {
		return []Step{{Kind: StepWait, Reason: p.waits[0]}}, p.err()
	}
	return nil, p.err()
}

// fillSlots assigns unowned slots to the desired masters (bootstrap, or slots freed after a
// lost shard was accepted). On a fresh cluster it also gives each master a distinct config
// epoch before the first MEET, as redis-cli --cluster create does. In a cluster that was
// formed before (Desired.Formed) unowned slots held data: they are reported lost instead,
// unless AllowDataLoss is set.
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
	targets := p.evenTargets()
	give := make([][]int, len(p.shards))
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

// members are the reachable endpoints that belong in the cluster: every desired node and
// the nodes of Leaving shards that still own slots.
func (p *planner) members() []*NodeView {
	var out []*NodeView
	for _, sh := range p.shards {
		for _, n := range sh.nodes {
			if n.Reachable() {
				out = append(out, n)
			}
		}
	}
	for _, sh := range p.leaving {
		if _, ok := p.drained(sh); ok {
			continue
		}
		for _, n := range sh.nodes {
			if n.Reachable() {
				out = append(out, n)
			}
		}
	}
	return out
}

// meetSteps introduces nodes the cluster does not know, or knows at a stale address. An
// anchor (the first member owning slots) meets the others; members that know a peer at an
// old address meet it directly, because gossip only corrects addresses of failing nodes.
func (p *planner) meetSteps() []Step {
	members := p.members()
	if len(members) < 2 {
		return nil
	}
	anchor := members[0]
	for _, n := range members {
		if n.OwnSlots().Len() > 0 {
			anchor = n
			break
		}
	}
	var steps []Step
	for _, m := range members {
		if m == anchor || knows(anchor, m) || handshaking(anchor, m.Endpoint.Addr) {
			continue
		}
		if anchor.Lookup(m.ID) == nil {
			if err := p.mergeConflict(anchor, m); err != nil {
				p.blockers = append(p.blockers, err)
				continue
			}
		}
		steps = append(steps, Step{Kind: StepMeet, Node: anchor.Endpoint.Name, Target: m.Endpoint.Name,
			Reason: fmt.Sprintf("%s does not know %s at %s", anchor.Endpoint.Name, m.Endpoint.Name, m.Endpoint.Addr)})
	}
	for _, a := range members {
		if a == anchor {
			continue
		}
		for _, b := range members {
			if b == a || !knows(anchor, b) || handshaking(a, b.Endpoint.Addr) {
				continue
			}
			if r := a.Lookup(b.ID); r != nil && !r.Flags.Handshake && !sameAddr(*r, b.Endpoint.Addr) {
				steps = append(steps, Step{Kind: StepMeet, Node: a.Endpoint.Name, Target: b.Endpoint.Name,
					Reason: fmt.Sprintf("%s knows %s at a stale address", a.Endpoint.Name, b.Endpoint.Name)})
			}
		}
	}
	return steps
}

// mergeConflict refuses to meet a node whose own slot claims would win over the slots the
// cluster assigns to others (a newer config epoch: it would take their slots and data).
// Claims with an older epoch are safe: the node loses them and becomes a replica, as an old
// master does when it comes back (spec: "How nodes rejoin the cluster").
//
// It also refuses a node that has live links to nodes this cluster does not know and that
// are none of the endpoints: it belongs to another running cluster (e.g. a reused volume),
// and meeting it would merge the two through gossip.
func (p *planner) mergeConflict(anchor, m *NodeView) error {
	for _, r := range m.Known {
		if r.Flags.Myself || !r.Connected || r.Failing() || r.Flags.Handshake || r.Flags.NoAddr {
			continue
		}
		if anchor.Lookup(r.ID) == nil && p.byID[r.ID] == nil {
			return fmt.Errorf("%w: %s is linked to node %s (%s), which is not part of this cluster; refusing to meet it",
				ErrConflict, m.Endpoint.Name, r.ID, r.Addr())
		}
	}
	self := m.Self()
	if self == nil || len(self.Slots) == 0 {
		return nil
	}
	own := m.OwnSlots()
	for _, r := range anchor.Known {
		if r.ID == m.ID || len(r.Slots) == 0 {
			continue
		}
		overlap := 0
		for _, sr := range r.Slots {
			for s := sr.Start; s <= sr.End; s++ {
				if own.Has(s) {
					overlap++
				}
			}
		}
		if overlap > 0 && self.ConfigEpoch >= r.ConfigEpoch {
			return fmt.Errorf("%w: %s (node %s, epoch %d) claims %d slots that the cluster assigns to node %s (epoch %d); refusing to meet it",
				ErrConflict, m.Endpoint.Name, m.ID, self.ConfigEpoch, overlap, r.ID, r.ConfigEpoch)
		}
	}
	return nil
}

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
	var table [NumSlots]string
	for _, r := range n.Known {
		for _, sr := range r.Slots {
			for s := sr.Start; s <= sr.End; s++ {
				table[s] = r.ID
			}
		}
	}
	d := 0
	for s := range NumSlots {
		if table[s] != a.owner[s] {
			d++
		}
	}
	return d
}
