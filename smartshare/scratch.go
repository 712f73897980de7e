package smartshare

import "sync"

// scratch is the planner's working memory, kept between calls (a
// sync.Pool): at a million slots it is some 50 MB, which allocated afresh
// on every call doubled the garbage collector's work and the page faults
// of a plan. Nothing in it outlives a call: every slice is resized and
// cleared (or wholly overwritten) before use, and what holds strings of
// the input is cleared when the call ends, so a pooled scratch keeps no
// input alive and no call sees another's data.
type scratch struct {
	mo, bf, bfPos         []int32
	mach                  []machState
	keys, keysTmp         []jkey
	jobs                  []jobState
	slot32                []int32 // slotJob, slotRun, slotInst
	slot8                 []uint8 // slotKind, slotFlag
	slotMach              []int32
	cnt, jrs              []int32
	jobList, tmp, victims []int32
	caps, floors          []int32 // waterfill's
	mIdx, jIdx            []idSlot
	ids, mIDs             []string
	encOff, preempted     []int32
	enc                   []byte
	lostToHigher          []bool
	encBuf                []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// release clears what refers to the input and returns sc to the pool.
func (sc *scratch) release() {
	clear(sc.ids)
	clear(sc.mIDs)
	scratchPool.Put(sc)
}

// sized returns s with length n, reusing its array when it is large enough;
// its elements are not cleared (the caller overwrites every one).
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// zeroed returns s with length n and every element zero.
func zeroed[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}
