package topology

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// NumSlots is the number of hash slots of a Redis Cluster (spec: "Key distribution model":
// HASH_SLOT = CRC16(key) mod 16384).
const NumSlots = 16384

// SlotRange is an inclusive range of hash slots, Start <= End, both in [0, NumSlots).
type SlotRange struct {
	Start, End int
}

// String formats the range the way CLUSTER NODES does: "5" or "0-5460".
func (r SlotRange) String() string {
	if r.Start == r.End {
		return strconv.Itoa(r.Start)
	}
	return strconv.Itoa(r.Start) + "-" + strconv.Itoa(r.End)
}

// Len is the number of slots in the range.
func (r SlotRange) Len() int { return r.End - r.Start + 1 }

// ParseSlotRange parses "5" or "0-5460".
func ParseSlotRange(s string) (SlotRange, error) {
	a, b, isRange := strings.Cut(s, "-")
	start, err := parseSlot(a)
	if err != nil {
		return SlotRange{}, err
	}
	end := start
	if isRange {
		if end, err = parseSlot(b); err != nil {
			return SlotRange{}, err
		}
	}
	if end < start {
		return SlotRange{}, fmt.Errorf("slot range %q ends before it starts", s)
	}
	return SlotRange{Start: start, End: end}, nil
}

func parseSlot(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= NumSlots {
		return 0, fmt.Errorf("invalid slot %q: want an integer in [0, %d)", s, NumSlots)
	}
	return n, nil
}

// FormatRanges joins ranges as "0-5460,5462".
func FormatRanges(rs []SlotRange) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

// SlotSet is a set of hash slots. The zero value is empty and ready to use.
type SlotSet struct {
	words [NumSlots / 64]uint64
}

// SlotSetOf returns the set holding the given ranges.
func SlotSetOf(rs ...SlotRange) SlotSet {
	var s SlotSet
	for _, r := range rs {
		s.AddRange(r)
	}
	return s
}

// Add inserts one slot.
func (s *SlotSet) Add(slot int) { s.words[slot/64] |= 1 << (slot % 64) }

// Remove deletes one slot.
func (s *SlotSet) Remove(slot int) { s.words[slot/64] &^= 1 << (slot % 64) }

// Has reports whether slot is in the set.
func (s *SlotSet) Has(slot int) bool { return s.words[slot/64]&(1<<(slot%64)) != 0 }

// AddRange inserts every slot of r.
func (s *SlotSet) AddRange(r SlotRange) {
	for i := r.Start; i <= r.End; i++ {
		s.Add(i)
	}
}

// Len is the number of slots in the set.
func (s *SlotSet) Len() int {
	n := 0
	for _, w := range s.words {
		n += bits.OnesCount64(w)
	}
	return n
}

// Slots lists the slots in ascending order.
func (s *SlotSet) Slots() []int {
	out := make([]int, 0, s.Len())
	for wi, w := range s.words {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, wi*64+b)
			w &^= 1 << b
		}
	}
	return out
}

// Ranges lists the set as maximal ascending ranges.
func (s *SlotSet) Ranges() []SlotRange {
	var out []SlotRange
	start := -1
	for i := 0; i <= NumSlots; i++ {
		in := i < NumSlots && s.words[i/64]&(1<<(i%64)) != 0
		if i%64 == 0 && i < NumSlots && start < 0 && s.words[i/64] == 0 {
			i += 63 // skip an empty word
			continue
		}
		switch {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			out = append(out, SlotRange{Start: start, End: i - 1})
			start = -1
		}
	}
	return out
}

// RangesOf compresses ascending slots into maximal ranges.
func RangesOf(slots []int) []SlotRange {
	var out []SlotRange
	for _, sl := range slots {
		if n := len(out); n > 0 && out[n-1].End+1 == sl {
			out[n-1].End = sl
			continue
		}
		out = append(out, SlotRange{Start: sl, End: sl})
	}
	return out
}

// countRanges is the number of slots in rs.
func countRanges(rs []SlotRange) int {
	n := 0
	for _, r := range rs {
		n += r.Len()
	}
	return n
}

// expand lists every slot of rs in order.
func expand(rs []SlotRange) []int {
	out := make([]int, 0, countRanges(rs))
	for _, r := range rs {
		for i := r.Start; i <= r.End; i++ {
			out = append(out, i)
		}
	}
	return out
}
