package dispatch

import (
	"strconv"
)

// Slot names one instance: a machine (its peer ID) and a slot on it.
type Slot struct {
	Machine string
	Slot    int
}

// String is "machine/slot".
func (s Slot) String() string { return s.Machine + "/" + strconv.Itoa(s.Slot) }

// Owners is a job's planned instances under one plan, in plan order: the
// owners of its items. Slots[k] has rank k, Ring gives each item's rank.
// Immutable once built.
type Owners struct {
	Slots []Slot
	Rank  map[Slot]int
	Ring  *Ring
}

// Seeds returns the ring seeds of a job's planned instances, in order.
func Seeds(job string, slots []Slot) []uint64 {
	seeds := make([]uint64, len(slots))
	for k, s := range slots {
		seeds[k] = OwnerSeed(job, s.Machine, s.Slot)
	}
	return seeds
}

// NewOwners returns the owners of a job's items: slots are its planned
// instances in plan order and ring is NewRing(Seeds(job, slots)), which a
// caller may keep cached (rings outlive plans that leave a job's instances
// alone).
func NewOwners(slots []Slot, ring *Ring) *Owners {
	o := &Owners{Slots: slots, Rank: make(map[Slot]int, len(slots)), Ring: ring}
	for k, s := range slots {
		o.Rank[s] = k
	}
	return o
}
