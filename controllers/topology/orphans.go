package topology

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// This file holds the planner's handling of slots whose owner the engine cannot reach or
// whose data is gone: waiting for Redis's own failover, forcing a promotion only when Redis
// cannot elect, and reporting lost slots.

// takeoverAfter is how long a replica must have seen its master failing before the engine
// forces a promotion in a cluster that cannot elect one: it keeps a short blip of the
// operator's view from ending in a TAKEOVER.
func (p *planner) takeoverAfter() time.Duration {
	return max(6*p.nodeTimeout, 10*time.Second)
}

// orphanSteps handles slots whose owner is unreachable from the engine: wait for Redis to
// promote a replica, force one with TAKEOVER only when Redis cannot elect (see takeover),
// wait for the node to come back, or — when every endpoint is up and none carries the owner
// or follows it — declare its slots lost.
func (p *planner) orphanSteps() []Step {
	var dead []string
	for id := range p.slotCount {
		if p.byID[id] == nil {
			dead = append(dead, id)
		}
	}
	sort.Strings(dead)
	var steps []Step
	var lost []string
	for _, id := range dead {
		var replicas []*NodeView
		for _, n := range p.reachable() {
			if n.MasterID() == id {
				replicas = append(replicas, n)
			}
		}
		switch {
		case len(replicas) > 0:
			if st, ok := p.takeover(id, replicas); ok {
				steps = append(steps, st)
			}
		case !p.allReachable:
			p.block(ErrNotReady, "node %s owning %d slots is unreachable", id, p.slotCount[id])
		default:
			lost = append(lost, id)
		}
	}
	if len(lost) == 0 {
		return steps
	}
	var slots []int
	var shards []string
	for _, id := range lost {
		slots = append(slots, p.ownedBy(id)...)
		if sh := p.ownerOf[id]; sh != nil {
			shards = append(shards, sh.spec.Name)
		}
	}
	sort.Ints(slots)
	p.reportLost(lost, slots, shards)
	if !p.desired.AllowDataLoss {
		p.block(ErrShardLost, "%d slots (%s) were owned by node(s) %s, gone with all replicas; set AllowDataLoss to re-assign them empty",
			len(slots), FormatRanges(RangesOf(slots)), strings.Join(lost, ","))
		return steps
	}
	for _, id := range lost {
		if on := p.forgetTargets(id, nil); len(on) > 0 {
			steps = append(steps, Step{Kind: StepForget, NodeID: id, On: on, Option: ForgetDataLoss,
				Reason: fmt.Sprintf("lost owner of %d slots; data loss allowed", p.slotCount[id])})
		}
	}
	return steps
}

// shardName names the shard an owner ID maps to, for messages.
func (p *planner) shardName(id string) string {
	if sh := p.ownerOf[id]; sh != nil {
		return sh.spec.Name
	}
	return "?"
}

// mastersAlive counts the slot-owning masters that can vote in a failover election: those
// the engine reaches that no reachable node flags as failed, and those it cannot reach that
// some reachable node sees healthy (the engine's own link may be the broken one). It returns
// that count and the number of slot-owning masters.
func (p *planner) mastersAlive() (alive, total int) {
	for id := range p.slotCount {
		total++
		if p.byID[id] == nil {
			if p.aliveSomewhere(id) {
				alive++
			}
			continue
		}
		failed := false
		for _, n := range p.reachable() {
			if r := n.Lookup(id); r != nil && !r.Flags.Myself && r.Flags.Fail {
				failed = true
			}
		}
		if !failed {
			alive++
		}
	}
	return alive, total
}

// takeover decides, for a slot owner the engine cannot reach but whose replicas it reaches,
// between waiting for Redis and CLUSTER FAILOVER TAKEOVER.
//
// A replica wins an election only with the votes of a majority of the masters that serve
// slots, (size/2)+1 (spec: "Replica election and promotion"; cluster.c
// clusterHandleSlaveFailover), and only once that majority flagged its master FAIL. While
// such a majority is alive, Redis decides by itself: if it does not promote, the master is
// still alive for the majority (an asymmetric partition), and forcing a promotion would
// leave two masters accepting writes for the same slots, losing the old master's. So the
// engine waits. Only when no majority can vote does it force the promotion, after the
// chosen replica has seen its master failing for takeoverAfter, on the reachable replica
// with the highest replication offset (the least data lost).
func (p *planner) takeover(id string, replicas []*NodeView) (Step, bool) {
	shard := p.shardName(id)
	alive, total := p.mastersAlive()
	quorum := total/2 + 1
	if alive >= quorum {
		p.wait("shard %s: waiting for Redis to promote a replica of master %s (%d slots), unreachable from the engine: %d of %d slot-owning masters are alive (quorum %d), so Redis's own election decides",
			shard, id, p.slotCount[id], alive, total, quorum)
		return Step{}, false
	}
	best := replicas[0]
	for _, r := range replicas[1:] {
		if r.Replication.Offset > best.Replication.Offset {
			best = r
		}
	}
	rec := best.Lookup(id)
	if rec == nil || !rec.Failing() || rec.PongRecv <= 0 || p.now.IsZero() ||
		p.now.Sub(time.UnixMilli(rec.PongRecv)) <= p.takeoverAfter() {
		p.wait("shard %s: master %s unreachable and only %d of %d slot-owning masters alive (quorum %d); forcing a promotion once %s has seen it failing for %s",
			shard, id, alive, total, quorum, best.Endpoint.Name, p.takeoverAfter())
		return Step{}, false
	}
	return Step{Kind: StepFailover, Node: best.Endpoint.Name, Option: "TAKEOVER",
		Reason: fmt.Sprintf("shard %s: master %s failing for more than %s and only %d of %d slot-owning masters alive (quorum %d): Redis cannot elect; %s has the highest replication offset (%d)",
			shard, id, p.takeoverAfter(), alive, total, quorum, best.Endpoint.Name, best.Replication.Offset)}, true
}

// reportLost records slots whose data is gone in p.lost, merging with what an earlier
// phase recorded. ids are the vanished owners (if known), shards the shards they belonged
// to (if known).
func (p *planner) reportLost(ids []string, slots []int, shards []string) {
	if p.lost == nil {
		p.lost = &LostShard{}
	}
	ls := p.lost
	set := SlotSetOf(ls.Slots...)
	for _, s := range slots {
		set.Add(s)
	}
	ls.Slots, ls.SlotCount = set.Ranges(), set.Len()
	for _, id := range ids {
		if !slices.Contains(ls.NodeIDs, id) {
			ls.NodeIDs = append(ls.NodeIDs, id)
		}
	}
	for _, name := range shards {
		if !slices.Contains(ls.Shards, name) {
			ls.Shards = append(ls.Shards, name)
		}
	}
}

// lostUnowned reports slots that no node claims in a cluster that was formed before
// (Desired.Formed): they held data, and assigning them as on a new cluster would hide that
// their keys are gone. The shards named are the desired shards that own no slots (the
// candidates: a shard keeps its slots while any of its nodes survives).
func (p *planner) lostUnowned(unassigned []int) {
	var shards []string
	for _, sh := range p.shards {
		if len(sh.owners) == 0 {
			shards = append(shards, sh.spec.Name)
		}
	}
	p.reportLost(nil, unassigned, shards)
	p.block(ErrShardLost, "%d slots (%s) have no owner in a cluster that was formed before: their data is gone (shards without slots: %s); set AllowDataLoss to re-assign them empty",
		len(unassigned), FormatRanges(RangesOf(unassigned)), strings.Join(shards, ","))
}
