package topology

import (
	"context"
	"fmt"
	"time"
)

// spreadDim is one failure domain the masters are spread over: zones, then nodes.
type spreadDim struct {
	name string // "zone" or "node", for the step's reason
	of   func(Endpoint) string
}

var spreadDims = []spreadDim{
	{name: "zone", of: func(ep Endpoint) string { return ep.Zone }},
	{name: "node", of: func(ep Endpoint) string { return ep.Node }},
}

// spreadLoad is the number of a dimension's masters per domain and its share.
type spreadLoad struct {
	dim   spreadDim
	count map[string]int
	share int // ceil(masters / domains in use)
	max   int
	atMax int // domains holding max masters
}

// spreadScore is the loads' (max, domains at max) per dimension, zones first: a move is made
// only when it lowers this lexicographically, so moves never undo each other.
type spreadScore []int

func (a spreadScore) less(b spreadScore) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// spreadSteps plans at most one planned failover (plain CLUSTER FAILOVER on a replica in
// sync, never FORCE or TAKEOVER) that moves a master off a zone or node holding more than
// its share of the desired shards' masters, ceil(masters / zones or nodes the cluster's pods
// run on), onto a replica in a zone or node below its share: after failovers (a lost node,
// a drain) have piled the masters up, losing that one node or zone would cost several
// shards their master at once.
//
// It runs only when Desired.HoldSpread is false and the cluster is otherwise converged and
// settled: it is called after every other phase found nothing to do, and it also requires
// every endpoint of the desired shards to know its node (Endpoint.Node; zones count only
// when every endpoint has one), to be reachable and neither NotReady nor NoSlots, no
// leaving shard, no node flagged PFAIL or FAIL in any member's table, and the chosen
// replica's master link up. Hysteresis: a move is planned only when it strictly lowers,
// zones first, the highest count of masters per domain or else the number of domains
// holding that count; so a balanced cluster never moves and moves never undo each other.
// Of the moves that qualify, the one with the lowest outcome is chosen, ties by shard then
// endpoint order. The step's Reason says what and why.
func (p *planner) spreadSteps() []Step {
	if p.desired.HoldSpread || len(p.leaving) > 0 {
		return nil
	}
	placed, dims, inUse := spreadDomains(p.desired)
	for _, n := range p.nodes {
		if ep := placed[n.Endpoint.Name]; !n.Reachable() || ep.NotReady || ep.NoSlots != "" || ep.Node == "" {
			return nil
		}
		for _, r := range n.Known {
			if r.Failing() {
				return nil
			}
		}
	}
	masters := make([]Endpoint, len(p.shards))
	for i, sh := range p.shards {
		if sh.master == nil {
			return nil
		}
		masters[i] = placed[sh.master.Endpoint.Name]
	}
	loads := spreadLoads(dims, inUse, masters)
	over := false
	for _, l := range loads {
		over = over || l.max > l.share
	}
	if !over {
		return nil
	}
	best, bestShard := (*NodeView)(nil), -1
	var bestScore spreadScore
	current := score(loads)
	for i, sh := range p.shards {
		if !overShare(loads, masters[i]) {
			continue
		}
		for _, n := range sh.nodes {
			if n == sh.master || n.MasterID() != sh.masterID || !n.Replication.MasterLinkUp {
				continue
			}
			moved := append([]Endpoint(nil), masters...)
			moved[i] = placed[n.Endpoint.Name]
			s := score(spreadLoads(dims, inUse, moved))
			if s.less(current) && (best == nil || s.less(bestScore)) {
				best, bestShard, bestScore = n, i, s
			}
		}
	}
	if best == nil {
		return nil
	}
	from := masters[bestShard]
	reason := fmt.Sprintf("moving master of %s to %s: masters are piled up", p.shards[bestShard].spec.Name, best.Endpoint.Name)
	for _, l := range loads {
		if a, b := l.dim.of(from), l.dim.of(placed[best.Endpoint.Name]); a != b && l.count[a] > l.share {
			reason = fmt.Sprintf("moving master of %s from %s %s to %s %s: %s %s holds %d masters, its share is %d",
				p.shards[bestShard].spec.Name, l.dim.name, a, l.dim.name, b, l.dim.name, a, l.count[a], l.share)
			break
		}
	}
	return []Step{{Kind: StepFailover, Node: best.Endpoint.Name, NodeID: p.shards[bestShard].masterID, Reason: reason}}
}

// spreadDomains maps each endpoint of d's desired shards by name, and lists the dimensions
// their masters spread over with the number of domains of each in use: a dimension counts
// only when every endpoint names its domain and there is more than one.
func spreadDomains(d Desired) (placed map[string]Endpoint, dims []spreadDim, inUse []int) {
	placed = map[string]Endpoint{}
	for _, sh := range d.Shards {
		for _, ep := range sh.Nodes {
			placed[ep.Name] = ep
		}
	}
	for _, dim := range spreadDims {
		seen := map[string]bool{}
		for _, ep := range placed {
			seen[dim.of(ep)] = true
		}
		if !seen[""] && len(seen) > 1 {
			dims, inUse = append(dims, dim), append(inUse, len(seen))
		}
	}
	return placed, dims, inUse
}

// spreadLoads counts masters per domain of each dimension; inUse[i] is the number of
// domains of dims[i] the desired shards' pods run on.
func spreadLoads(dims []spreadDim, inUse []int, masters []Endpoint) []spreadLoad {
	var out []spreadLoad
	for i, d := range dims {
		l := spreadLoad{dim: d, count: map[string]int{}, share: (len(masters) + inUse[i] - 1) / inUse[i]}
		for _, m := range masters {
			l.count[d.of(m)]++
		}
		for _, c := range l.count {
			switch {
			case c > l.max:
				l.max, l.atMax = c, 1
			case c == l.max:
				l.atMax++
			}
		}
		out = append(out, l)
	}
	return out
}

// overShare reports whether the master at ep is in a domain above its share in any
// dimension.
func overShare(loads []spreadLoad, ep Endpoint) bool {
	for _, l := range loads {
		if l.count[l.dim.of(ep)] > l.share {
			return true
		}
	}
	return false
}

func score(loads []spreadLoad) spreadScore {
	var s spreadScore
	for _, l := range loads {
		s = append(s, l.max, l.atMax)
	}
	return s
}

// spreadMaster runs a planned spreading failover (spreadSteps): CLUSTER FAILOVER on replica
// n, whose master stops its clients until n has its whole replication stream, so no
// acknowledged write is lost (command page CLUSTER FAILOVER); then it waits until n reports
// itself master, at most 3× cluster-node-timeout (at least 10 s), so that the next
// observation sees the move done and does not plan it again. Errors: ErrFailover when n is
// not promoted in time, the command's error, or ctx.Err().
func (e *Engine) spreadMaster(ctx context.Context, c *conns, view *ClusterView, n *NodeView, s Step) error {
	e.log.Info("Moving master", "node", n.Endpoint.Name, "masterID", s.NodeID, "reason", s.Reason)
	if err := e.do(ctx, c, n, "CLUSTER", "FAILOVER"); err != nil {
		return err
	}
	timeout := max(3*maxNodeTimeout(view.Nodes...), 10*time.Second)
	ok, err := e.pollNode(ctx, c, n, timeout, func(self *NodeRecord) bool { return self.Flags.Master })
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s not promoted within %s", ErrFailover, n.Endpoint.Name, timeout)
	}
	return nil
}
