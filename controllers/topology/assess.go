package topology

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// shardState is what the planner knows about one shard of Desired.
type shardState struct {
	spec    ShardSpec
	index   int
	leaving bool
	nodes   []*NodeView // one per spec node; unreachable ones carry Err
	// owners are the node IDs mapped to this shard that own slots, most slots first.
	owners []string
	// masterID is the shard's master: its biggest owner, or for a shard without slots a
	// reachable empty master of the shard (a candidate, see chooseMasters). "" when there is none.
	masterID string
	master   *NodeView // reachable view of masterID, nil when unreachable
}

// assessment is the derived, read-only picture of one ClusterView against Desired.
type assessment struct {
	view    *ClusterView
	desired Desired
	now     time.Time

	nodes   []*NodeView // every desired endpoint (Shards then Leaving)
	byName  map[string]*NodeView
	byID    map[string]*NodeView // reachable nodes by their own ID
	shardOf map[string]*shardState
	shards  []*shardState
	leaving []*shardState

	// owner is the consensus owner ID of each slot, "" when unassigned: a reachable master's
	// claim on itself wins; otherwise the owner most reachable nodes' tables name.
	owner     [NumSlots]string
	contested SlotSet // slots that more than one reachable master claims for itself
	ownerOf   map[string]*shardState
	slotCount map[string]int // owner ID -> slots owned

	allReachable bool
	// nodeTimeout is the desired nodes' cluster-node-timeout (maxNodeTimeout).
	nodeTimeout time.Duration
}

var errNotObserved = errors.New("not observed")

func assess(view *ClusterView, d Desired) *assessment {
	a := &assessment{
		view:      view,
		desired:   d,
		byName:    map[string]*NodeView{},
		byID:      map[string]*NodeView{},
		shardOf:   map[string]*shardState{},
		ownerOf:   map[string]*shardState{},
		slotCount: map[string]int{},
	}
	if view != nil {
		a.now = view.ObservedAt
	}
	a.allReachable = true
	add := func(spec ShardSpec, index int, leaving bool) *shardState {
		sh := &shardState{spec: spec, index: index, leaving: leaving}
		for _, ep := range spec.Nodes {
			n := view.Node(ep.Name)
			switch {
			case ep.Down != "":
				n = &NodeView{Endpoint: ep, Err: fmt.Errorf("%w: %s", errDown, ep.Down)}
			case n == nil || n.Endpoint.Addr != ep.Addr:
				n = &NodeView{Endpoint: ep, Err: errNotObserved}
			}
			sh.nodes = append(sh.nodes, n)
			a.nodes = append(a.nodes, n)
			a.byName[ep.Name] = n
			a.shardOf[ep.Name] = sh
			if n.Reachable() {
				a.byID[n.ID] = n
			} else {
				a.allReachable = false
			}
		}
		return sh
	}
	for i, s := range d.Shards {
		a.shards = append(a.shards, add(s, i, false))
	}
	for i, s := range d.Leaving {
		a.leaving = append(a.leaving, add(s, i, true))
	}
	a.computeOwners()
	a.mapOwners()
	a.chooseMasters()
	a.nodeTimeout = maxNodeTimeout(a.nodes...)
	return a
}

// reachable lists reachable desired endpoints in order.
func (a *assessment) reachable() []*NodeView {
	var out []*NodeView
	for _, n := range a.nodes {
		if n.Reachable() {
			out = append(out, n)
		}
	}
	return out
}

func (a *assessment) computeOwners() {
	type claim struct {
		id    string
		epoch uint64
	}
	// a.owner takes each slot's first claim by a reachable master; more holds the other
	// claims (a slot claimed twice is rare: one small map instead of a slice per slot),
	// firstEpoch the first claimant's epoch for those slots only.
	more := map[int][]claim{}
	firstEpoch := map[string]uint64{}
	for _, n := range a.reachable() {
		self := n.Self()
		if self == nil || !self.Flags.Master {
			continue
		}
		firstEpoch[n.ID] = self.ConfigEpoch
		for _, r := range self.Slots {
			for s := r.Start; s <= r.End; s++ {
				if a.owner[s] == "" {
					a.owner[s] = n.ID
				} else {
					more[s] = append(more[s], claim{n.ID, self.ConfigEpoch})
				}
			}
		}
	}
	// Table votes for slots nobody reachable claims.
	votes := map[string]map[int]int{} // owner -> slot -> votes, only for unreachable owners
	epochs := map[string]uint64{}
	for _, n := range a.reachable() {
		for _, r := range n.Known {
			if r.Flags.Myself || len(r.Slots) == 0 || a.byID[r.ID] != nil {
				continue
			}
			if votes[r.ID] == nil {
				votes[r.ID] = map[int]int{}
			}
			epochs[r.ID] = max(epochs[r.ID], r.ConfigEpoch)
			for _, sr := range r.Slots {
				for s := sr.Start; s <= sr.End; s++ {
					votes[r.ID][s]++
				}
			}
		}
	}
	ids := make([]string, 0, len(votes))
	for id := range votes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	run, runLen := "", 0 // slotCount is counted by runs of one owner
	for s := range NumSlots {
		switch {
		case a.owner[s] == "":
			best, bestVotes := "", 0
			for _, id := range ids {
				v := votes[id][s]
				if v > bestVotes || v == bestVotes && v > 0 && epochs[id] > epochs[best] {
					best, bestVotes = id, v
				}
			}
			a.owner[s] = best
		case len(more[s]) > 0:
			a.contested.Add(s)
			best := claim{a.owner[s], firstEpoch[a.owner[s]]}
			for _, c := range more[s] {
				if c.epoch > best.epoch || c.epoch == best.epoch && c.id < best.id {
					best = c
				}
			}
			a.owner[s] = best.id
		}
		if a.owner[s] != run {
			if run != "" {
				a.slotCount[run] += runLen
			}
			run, runLen = a.owner[s], 0
		}
		runLen++
	}
	if run != "" {
		a.slotCount[run] += runLen
	}
}

// mapOwners decides which shard each slot owner belongs to: its own endpoint when
// reachable; else the shard of a reachable replica following it; else the endpoint whose
// address the tables give for it.
func (a *assessment) mapOwners() {
	for id := range a.slotCount {
		if n := a.byID[id]; n != nil {
			a.ownerOf[id] = a.shardOf[n.Endpoint.Name]
			continue
		}
		for _, n := range a.reachable() {
			if n.MasterID() == id {
				a.ownerOf[id] = a.shardOf[n.Endpoint.Name]
				break
			}
		}
		if a.ownerOf[id] != nil {
			continue
		}
		a.ownerOf[id] = a.shardByRecordAddr(id)
	}
	// A dead owner whose address was lost (Redis marks it noaddr once another node answers
	// there) belongs, when unambiguous, to the only desired shard left without an owner.
	var unmapped []string
	for id, sh := range a.ownerOf {
		if sh == nil {
			unmapped = append(unmapped, id)
		}
	}
	var ownerless []*shardState
	for _, sh := range a.shards {
		has := false
		for _, owner := range a.ownerOf {
			has = has || owner == sh
		}
		if !has {
			ownerless = append(ownerless, sh)
		}
	}
	if len(unmapped) == 1 && len(ownerless) == 1 {
		a.ownerOf[unmapped[0]] = ownerless[0]
	}
	for _, sh := range append(append([]*shardState{}, a.shards...), a.leaving...) {
		for id, owner := range a.ownerOf {
			if owner == sh {
				sh.owners = append(sh.owners, id)
			}
		}
		sort.Slice(sh.owners, func(i, j int) bool {
			ci, cj := a.slotCount[sh.owners[i]], a.slotCount[sh.owners[j]]
			if ci != cj {
				return ci > cj
			}
			ri, rj := a.byID[sh.owners[i]] != nil, a.byID[sh.owners[j]] != nil
			if ri != rj {
				return ri
			}
			return sh.owners[i] < sh.owners[j]
		})
	}
}

// shardByRecordAddr maps an ID that is not a reachable node to the shard of the endpoint
// whose address some table records for it (unreachable endpoints first).
func (a *assessment) shardByRecordAddr(id string) *shardState {
	var fallback *shardState
	for _, n := range a.reachable() {
		r := n.Lookup(id)
		if r == nil {
			continue
		}
		for _, ep := range a.nodes {
			if sameAddr(*r, ep.Endpoint.Addr) {
				if !ep.Reachable() {
					return a.shardOf[ep.Endpoint.Name]
				}
				if fallback == nil {
					fallback = a.shardOf[ep.Endpoint.Name]
				}
			}
		}
	}
	return fallback
}

// chooseMasters sets each shard's master: its biggest owner; for a desired shard that owns no
// slot (bootstrap, a new shard) a candidate, a reachable master of the shard that owns no slot
// and has none open. The candidates are chosen together so that all the masters spread best
// over zones, then nodes (spreadDomains and score, the measure spreadSteps uses): every
// combination is tried when there are at most maxSpreadCombinations, else each shard in turn
// takes its best candidate given those before. Ties, and endpoints without a known node or
// zone, keep each shard's endpoint order. So a new cluster's masters start spread, and no
// planned failover has to move them before a zone or node may be lost safely.
func (a *assessment) chooseMasters() {
	var owning []string // the endpoints of the masters of shards that own slots
	for _, sh := range a.leaving {
		if len(sh.owners) > 0 {
			sh.masterID = sh.owners[0]
			sh.master = a.byID[sh.masterID]
		}
	}
	var empty []*shardState
	var options [][]*NodeView // candidates of each empty shard, in endpoint order
	combinations := 1
	for _, sh := range a.shards {
		if len(sh.owners) > 0 {
			sh.masterID = sh.owners[0]
			sh.master = a.byID[sh.masterID]
			if sh.master != nil {
				owning = append(owning, sh.master.Endpoint.Name)
			}
			continue
		}
		var cands []*NodeView
		for _, n := range sh.nodes {
			if n.Reachable() && n.IsMaster() && a.slotCount[n.ID] == 0 && !hasOpenSlots(n) {
				cands = append(cands, n)
			}
		}
		if len(cands) > 0 {
			empty, options = append(empty, sh), append(options, cands)
			combinations = min(combinations*len(cands), maxSpreadCombinations+1)
		}
	}
	if len(empty) == 0 { // a settled cluster: no spread to weigh on every pass
		return
	}
	placed, dims, inUse := spreadDomains(a.desired)
	chosen := make([]Endpoint, 0, len(owning))
	for _, name := range owning {
		chosen = append(chosen, placed[name])
	}
	placedOptions := make([][]Endpoint, len(options))
	for i, cands := range options {
		for _, n := range cands {
			placedOptions[i] = append(placedOptions[i], placed[n.Endpoint.Name])
		}
	}
	pick := pickSpread(dims, inUse, chosen, placedOptions, combinations)
	for i, sh := range empty {
		n := options[i][pick[i]]
		sh.masterID, sh.master = n.ID, n
	}
}

// pickSpread returns, for each shard of options (its candidate endpoints, in endpoint
// order), the index of the candidate that spreads the masters best given those already
// chosen: every combination when there are at most maxSpreadCombinations (combinations is
// their count, capped above it), else each shard in turn taking its best given those
// before. Without dims (placement not known everywhere) each shard takes its first.
func pickSpread(dims []spreadDim, inUse []int, chosen []Endpoint, options [][]Endpoint, combinations int) []int {
	pick := make([]int, len(options))
	if len(dims) > 0 && combinations <= maxSpreadCombinations {
		var best []int
		var bestScore spreadScore
		cur := make([]int, len(options))
		masters := slices.Clone(chosen)
		var try func(i int)
		try = func(i int) {
			if i == len(options) {
				if s := score(spreadLoads(dims, inUse, masters)); best == nil || s.less(bestScore) {
					best, bestScore = slices.Clone(cur), s
				}
				return
			}
			for j, ep := range options[i] {
				cur[i] = j
				masters = append(masters, ep)
				try(i + 1)
				masters = masters[:len(masters)-1]
			}
		}
		try(0)
		pick = best
	} else if len(dims) > 0 {
		masters := slices.Clone(chosen)
		for i := range options {
			var bestScore spreadScore
			for j, ep := range options[i] {
				s := score(spreadLoads(dims, inUse, append(masters[:len(masters):len(masters)], ep)))
				if j == 0 || s.less(bestScore) {
					pick[i], bestScore = j, s
				}
			}
			masters = append(masters, options[i][pick[i]])
		}
	}
	return pick
}

// maxSpreadCombinations bounds the candidate combinations chooseMasters tries all of: 4096
// covers up to 12 new shards of two pods or 7 of three; more shards are placed one by one.
const maxSpreadCombinations = 4096
