package topology

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
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
	// masterID is the shard's master: its biggest owner, or for a shard without slots the
	// first reachable empty master of the shard (a candidate). "" when there is none.
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
	// first holds each slot's first claim by a reachable master, more the others (a slot
	// claimed twice is rare: one small map instead of a slice per slot).
	var first [NumSlots]claim
	more := map[int][]claim{}
	for _, n := range a.reachable() {
		self := n.Self()
		if self == nil || !self.Flags.Master {
			continue
		}
		for _, r := range self.Slots {
			for s := r.Start; s <= r.End; s++ {
				if first[s].id == "" {
					first[s] = claim{n.ID, self.ConfigEpoch}
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
	for s := range NumSlots {
		switch {
		case first[s].id == "":
			best, bestVotes := "", 0
			for _, id := range ids {
				v := votes[id][s]
				if v > bestVotes || v == bestVotes && v > 0 && epochs[id] > epochs[best] {
					best, bestVotes = id, v
				}
			}
			a.owner[s] = best
		case len(more[s]) == 0:
			a.owner[s] = first[s].id
		default:
			a.contested.Add(s)
			best := first[s]
			for _, c := range more[s] {
				if c.epoch > best.epoch || c.epoch == best.epoch && c.id < best.id {
					best = c
				}
			}
			a.owner[s] = best.id
		}
		if a.owner[s] != "" {
			a.slotCount[a.owner[s]]++
		}
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

func (a *assessment) chooseMasters() {
	for _, sh := range append(append([]*shardState{}, a.shards...), a.leaving...) {
		if len(sh.owners) > 0 {
			sh.masterID = sh.owners[0]
			sh.master = a.byID[sh.masterID]
			continue
		}
		if sh.leaving {
			continue
		}
		for _, n := range sh.nodes {
			if n.Reachable() && n.IsMaster() && a.slotCount[n.ID] == 0 && !hasOpenSlots(n) {
				sh.masterID, sh.master = n.ID, n
				break
			}
		}
	}
}

func hasOpenSlots(n *NodeView) bool {
	s := n.Self()
	return s != nil && (len(s.Migrating) > 0 || len(s.Importing) > 0)
}

// sameAddr compares a table record's address with an endpoint address (IP forms normalised).
func sameAddr(r NodeRecord, addr string) bool {
	if r.Flags.NoAddr || r.IP == "" {
		return false
	}
	return addrEqual(net.JoinHostPort(r.IP, strconv.Itoa(r.Port)), addr)
}

// addrEqual compares two "ip:port" addresses, IP forms normalised.
func addrEqual(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	x, y := net.ParseIP(ha), net.ParseIP(hb)
	return x != nil && y != nil && x.Equal(y)
}

// knows reports whether node n's table has target's ID at target's endpoint address, past
// the handshake.
func knows(n, target *NodeView) bool {
	r := n.Lookup(target.ID)
	return r != nil && !r.Flags.Handshake && sameAddr(*r, target.Endpoint.Addr)
}

// handshaking reports whether n has a handshake in progress with addr.
func handshaking(n *NodeView, addr string) bool {
	for _, r := range n.Known {
		if r.Flags.Handshake && sameAddr(r, addr) {
			return true
		}
	}
	return false
}

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

// drained reports whether a leaving shard is drained, so its nodes may be forgotten and,
// once forgotten, deleted: it owns no slots, claims none, has no open slot (slotsFree), and
// every node of it is reachable and every master of it answers DBSIZE 0 (keysLeft). ids are the node IDs attributed to the
// shard.
func (a *assessment) drained(sh *shardState) (ids []string, ok bool) {
	ids, free := a.slotsFree(sh)
	return ids, free && a.keysLeft(sh) == nil
}

// keysLeft explains why a leaving shard still holds data: a master of it reports keys
// (DBSIZE > 0; ErrConflict: slots it does not own hold them, which the engine does not
// repair by itself), or a node cannot be asked (ErrNotReady). A replica's keys are a copy
// of its master's, so only masters count: a replica of the shard's drained master empties
// with it, and one that follows a desired master (Redis 7.0 turns a master that lost its
// last slot into a replica of the receiver) copies data that lives on there. A Down node
// (its pod does not run) holds no keys in memory, and what its disk holds is served
// elsewhere once every slot owner is reachable: then it does not keep the shard; while an
// unreachable node owns slots it does (it may be that node). nil when every node is
// reachable, or Down as above, and every master answers DBSIZE 0.
func (a *assessment) keysLeft(sh *shardState) error {
	for _, n := range sh.nodes {
		switch {
		case n.Down() && a.ownersReachable():
		case !n.Reachable():
			return fmt.Errorf("%w: leaving shard %s: %s is unreachable, so it is not known to hold no keys; not forgetting the shard: %v",
				ErrNotReady, sh.spec.Name, n.Endpoint.Name, n.Err)
		case n.IsMaster() && n.Keys > 0:
			return fmt.Errorf("%w: leaving shard %s: %s owns no slots but holds %d keys (DBSIZE); not forgetting the shard until they are moved or deleted",
				ErrConflict, sh.spec.Name, n.Endpoint.Name, n.Keys)
		}
	}
	return nil
}

// slotsFree reports whether a leaving shard owns no slots, claims none and has no open
// slot. ids are the node IDs attributed to the shard.
func (a *assessment) slotsFree(sh *shardState) (ids []string, ok bool) {
	ids = a.shardIDs(sh)
	for _, id := range ids {
		if a.slotCount[id] > 0 {
			return ids, false
		}
	}
	for _, n := range sh.nodes {
		if n.Reachable() && (n.OwnSlots().Len() > 0 || hasOpenSlots(n)) {
			return ids, false
		}
	}
	for _, id := range ids {
		if a.referencedByOpenSlot(id) {
			return ids, false
		}
	}
	return ids, true
}

// shardIDs are the node IDs attributed to a shard: its reachable nodes' own IDs, and IDs
// that tables record at the address of one of its unreachable nodes.
func (a *assessment) shardIDs(sh *shardState) []string {
	set := map[string]bool{}
	for _, n := range sh.nodes {
		if n.Reachable() {
			set[n.ID] = true
		}
	}
	for _, n := range sh.nodes {
		if n.Reachable() {
			continue
		}
		for _, other := range a.reachable() {
			for _, r := range other.Known {
				if !r.Flags.Handshake && a.byID[r.ID] == nil && sameAddr(r, n.Endpoint.Addr) {
					set[r.ID] = true
				}
			}
		}
	}
	for _, id := range sh.owners {
		set[id] = true
	}
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// forgetTargets lists the reachable nodes outside skip that still know id and may forget it
// (a replica cannot forget its own master).
func (a *assessment) forgetTargets(id string, skip *shardState) []string {
	var on []string
	for _, n := range a.reachable() {
		if n.ID == id || (skip != nil && a.shardOf[n.Endpoint.Name] == skip) {
			continue
		}
		if n.Lookup(id) != nil && n.MasterID() != id {
			on = append(on, n.Endpoint.Name)
		}
	}
	return on
}

// evenTargets splits NumSlots over the desired shards: counts differ by at most one and the
// extra slots go to the shards that own most now, so that the fewest slots move.
func (a *assessment) evenTargets() []int {
	n := len(a.shards)
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	count := func(i int) int { return a.slotCount[a.shards[i].masterID] }
	sort.SliceStable(order, func(x, y int) bool { return count(order[x]) > count(order[y]) })
	targets := make([]int, n)
	base, rem := NumSlots/n, NumSlots%n
	for k, i := range order {
		targets[i] = base
		if k < rem {
			targets[i]++
		}
	}
	return targets
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
