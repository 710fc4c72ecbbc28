package topology

import (
	"fmt"
	"sort"
)

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
// unreachable node owns slots it does (it may be that node). A node loading a dataset
// gives a loadingError, which the planner waits out rather than reports. nil when every node is
// reachable, or Down as above, and every master answers DBSIZE 0.
func (a *assessment) keysLeft(sh *shardState) error {
	for _, n := range sh.nodes {
		switch {
		case n.Down() && a.ownersReachable():
		case n.Loading():
			return loadingError(fmt.Sprintf("leaving shard %s: %s is loading a dataset, so it is not known to hold no keys yet",
				sh.spec.Name, n.Endpoint.Name))
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

// loadingError is keysLeft's answer when a node of the shard is loading a dataset: the next
// observation may change it within seconds, so the planner waits (its text is the wait's
// reason) instead of blocking. It is an ErrNotReady.
type loadingError string

func (e loadingError) Error() string { return string(e) }
func (e loadingError) Unwrap() error { return ErrNotReady }

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
