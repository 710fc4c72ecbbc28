package topology

import (
	"errors"
	"fmt"
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
	// StepReclaim: CLUSTER ADDSLOTSRANGE Slots on Node, a master that lost them from its own
	// table while every other table still names it their owner (reclaim.go); refused when
	// another master holds keys in them.
	StepReclaim StepKind = "Reclaim"
	// StepSetEpoch: CLUSTER SET-CONFIG-EPOCH Epoch on a fresh master, before it meets others,
	// so masters start with distinct epochs (spec: "configEpoch conflicts resolution").
	StepSetEpoch StepKind = "SetConfigEpoch"
	// StepMeet: CLUSTER MEET from Node to Target's address (spec: "Node handshake").
	StepMeet StepKind = "Meet"
	// StepTellOwner: CLUSTER SETSLOT <slot> NODE NodeID on Node for each of Slots: slots
	// master NodeID claims and Node's table gives to nobody. A new master learns the slot
	// table at once instead of from each owner's next ping after the handshake, and so
	// reports cluster_state:ok, which resharding waits for, as soon as Redis lets it
	// (spec: "Hash slots configuration propagation"). Best effort: gossip would tell it too.
	StepTellOwner StepKind = "TellOwner"
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
	// promotion"). Planned as TAKEOVER when the master is unreachable and no majority of the
	// slot-owning masters is alive to elect a replica; planned without Option (a manual
	// failover, NodeID the master) to spread masters piled up on a node or zone (spread.go).
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
	if (s.Kind == StepWait || s.Kind == StepFailover && s.Option == "") && s.Reason != "" {
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
//     cluster");
//  9. once everything else is converged, one master piled up with others on a node or zone
//     is moved onto its replica elsewhere by a planned CLUSTER FAILOVER (spread.go), unless
//     Desired.HoldSpread.
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

// isolated reports whether no reachable node knows another: none has met any yet.
func (p *planner) isolated() bool {
	for _, n := range p.reachable() {
		if len(n.Known) != 1 {
			return false
		}
	}
	return true
}

func (p *planner) plan() ([]Step, error) {
	if len(p.reachable()) == 0 {
		p.block(ErrNotReady, "no node is reachable")
		return nil, p.err()
	}
	if !p.allReachable && (len(p.slotCount) == 0 || p.desired.Fresh && p.isolated()) {
		// A cluster not formed yet is formed with every node at once: the masters get their
		// distinct config epochs before the first MEET, and no node that may hold slots
		// from an earlier life is left out. Only a fresh cluster's masters get their slots
		// before (early.go).
		steps := p.earlySlots()
		assigned := 0
		for _, c := range p.slotCount {
			assigned += c
		}
		p.block(ErrNotReady, "%d slots have no owner; waiting for every node to be reachable before the nodes meet", NumSlots-assigned)
		return steps, p.err()
	}
	// The phases run in this order; each lives in the file named after it.
	phases := []func() []Step{
		p.fillSlots,       // fill.go: unowned slots (bootstrap, accepted loss)
		p.meetSteps,       // meet.go: membership
		p.repairSteps,     // repair.go: open slots
		p.forgetDeadSteps, // forget.go: failed IDs no endpoint carries
		p.orphanSteps,     // orphans.go: masters outside the desired shape
		p.placementSteps,  // placement.go: replicas follow their shard's master
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
		if steps := p.tellOwnerSteps(); len(steps) > 0 { // meet.go
			return steps, p.err()
		}
		if len(p.waits) == 0 {
			return nil, p.err()
		}
		return []Step{{Kind: StepWait, Reason: p.waits[0]}}, p.err()
	}
	// balance.go: slot moves and leaving shards; converged.go: the final check.
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
	if len(p.blockers) == 0 {
		if steps := p.spreadSteps(); len(steps) > 0 { // spread.go
			return steps, nil
		}
	}
	return nil, p.err()
}
