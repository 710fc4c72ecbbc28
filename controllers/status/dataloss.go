package status

import (
	"fmt"
	"slices"

	cachev1beta1 "github.com/redis-operator/redis-operator/apis/cache/v1beta1"
	"github.com/redis-operator/redis-operator/controllers/topology"
)

// What status keeps about a formed cluster and its lost slots, so that a
// cluster whose nodes came back empty is reported, never rebuilt silently.

// FormedBefore reports whether a status records a formed cluster:
// formedTime is set, or (for a cluster formed by an operator version that
// did not record formedTime) the shards of status.shards together own all
// 16384 slots. Neither is derived from the nodes, so it holds when every
// node came back empty; neither holds in the middle of a bootstrap.
func FormedBefore(st *cachev1beta1.RedisClusterStatus) bool {
	if st.FormedTime != nil {
		return true
	}
	var owned topology.SlotSet
	for _, sh := range st.Shards {
		for _, r := range sh.Slots {
			if rg, err := topology.ParseSlotRange(r); err == nil && sh.MasterNodeID != "" {
				owned.AddRange(rg)
			}
		}
	}
	return owned.Len() == topology.NumSlots
}

// LostMessage is the ShardLost verdict of this pass, or "": the engine's
// data-loss report, or, when the engine did not run and slots are still
// uncovered (or Redis was not observed), the verdict the status held.
func (o *Observation) LostMessage() string {
	t := o.Topology
	switch {
	case t != nil && t.DataLoss != nil:
		return dataLossMessage(t.DataLoss, o.PreviousShards)
	case o.LostBefore != "" && (t == nil || (!t.EngineRan && t.SlotsAssigned < topology.NumSlots)):
		return o.LostBefore
	}
	return ""
}

// keepLastKnownMasters is status.shards from this observation, except
// that a shard that owns no slot now keeps the master node ID and slot
// ranges last recorded for it, with no master or replica pod, as long as
// no shard owns any of those slots now: what a lost or unreachable shard
// held stays known until its slots have a new owner.
func keepLastKnownMasters(cur, prev []cachev1beta1.ShardStatus) []cachev1beta1.ShardStatus {
	var owned topology.SlotSet
	for _, sh := range cur {
		for _, r := range sh.Slots {
			if rg, err := topology.ParseSlotRange(r); err == nil {
				owned.AddRange(rg)
			}
		}
	}
	out := slices.Clone(cur)
	for i, sh := range out {
		if len(sh.Slots) > 0 {
			continue
		}
		for _, p := range prev {
			if p.Name != sh.Name || p.MasterNodeID == "" || len(p.Slots) == 0 || anyOwned(&owned, p.Slots) {
				continue
			}
			out[i] = cachev1beta1.ShardStatus{Name: sh.Name, MasterNodeID: p.MasterNodeID, Slots: slices.Clone(p.Slots)}
		}
	}
	return out
}

func anyOwned(owned *topology.SlotSet, ranges []string) bool {
	for _, r := range ranges {
		if rg, err := topology.ParseSlotRange(r); err == nil && overlaps(owned, rg) {
			return true
		}
	}
	return false
}

// dataLossMessage names the lost slots, the shards that held them (the
// engine's names, else the shards whose last known slot ranges in status
// overlap them) and the opt-in repair.
func dataLossMessage(l *topology.LostShard, prev []cachev1beta1.ShardStatus) string {
	shards := l.Shards
	if len(shards) == 0 {
		shards = shardsHolding(l.Slots, prev)
	}
	held := "shards " + names(shards)
	if len(shards) == 0 {
		held = "shards not known"
	}
	return fmt.Sprintf("%d slots (%s) lost their master and every replica with their data (%s); "+
		"nothing destructive is done: bring the nodes back with their data, or set spec.lostShardPolicy to Reassign "+
		"to assign the slots empty to live masters, accepting that their keys are gone.",
		l.SlotCount, rangesText(l.Slots), held)
}

// shardsHolding names the shards whose slot ranges in status overlap
// slots, in status order.
func shardsHolding(slots []topology.SlotRange, prev []cachev1beta1.ShardStatus) []string {
	set := topology.SlotSetOf(slots...)
	var out []string
	for _, sh := range prev {
		for _, r := range sh.Slots {
			rg, err := topology.ParseSlotRange(r)
			if err == nil && overlaps(&set, rg) && !slices.Contains(out, sh.Name) {
				out = append(out, sh.Name)
			}
		}
	}
	return out
}

// uncoveredText is the uncovered slot ranges and the shards that last held
// them, for condition messages.
func uncoveredText(o *Observation) string {
	text := rangesText(o.Topology.Unassigned)
	if held := shardsHolding(o.Topology.Unassigned, o.PreviousShards); len(held) > 0 {
		text += " (last held by " + names(held) + ")"
	}
	return text
}

func overlaps(set *topology.SlotSet, r topology.SlotRange) bool {
	for slot := r.Start; slot <= r.End; slot++ {
		if set.Has(slot) {
			return true
		}
	}
	return false
}

// rangesText formats up to maxRangesInMessage slot ranges, then how many
// more, for condition messages.
func rangesText(rs []topology.SlotRange) string {
	if len(rs) <= maxRangesInMessage {
		return topology.FormatRanges(rs)
	}
	return fmt.Sprintf("%s and %d more ranges", topology.FormatRanges(rs[:maxRangesInMessage]), len(rs)-maxRangesInMessage)
}

// maxRangesInMessage bounds the slot ranges a condition message lists.
const maxRangesInMessage = 8
