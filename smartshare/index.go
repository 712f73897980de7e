package smartshare

import "hash/maphash"

// idIndex maps IDs to their index in a slice of keys: an open-addressing
// hash table of small pointer-free slots (a tag of the key's hash and the
// index), so that a lookup touches one slot of a table a quarter the size
// of one holding the keys, and the garbage collector never scans it. Its
// seed is random, but it only answers lookups: nothing about its layout
// reaches the plan.
type idIndex struct {
	seed  maphash.Seed
	mask  uint64
	keys  []string
	table []idSlot
}

type idSlot struct {
	tag uint32 // the high half of the key's hash
	v   int32  // index+1; 0 is empty
}

// newIDIndex indexes keys by their index; when keys repeat, the first
// wins. Its table is *buf's array when large enough (cleared), and *buf is
// left holding it.
func newIDIndex(buf *[]idSlot, keys []string) *idIndex {
	size := 16
	for size < 2*len(keys) {
		size <<= 1
	}
	x := &idIndex{seed: maphash.MakeSeed(), mask: uint64(size - 1), keys: keys, table: zeroed(*buf, size)}
	*buf = x.table
	for v, id := range keys {
		h := maphash.String(x.seed, id)
		tag := uint32(h >> 32)
		for i := h & x.mask; ; i = (i + 1) & x.mask {
			e := &x.table[i]
			if e.v == 0 {
				*e = idSlot{tag: tag, v: int32(v) + 1}
				break
			}
			if e.tag == tag && keys[e.v-1] == id {
				break // a repeat: the first stays
			}
		}
	}
	return x
}

// get returns the index of id, or -1.
func (x *idIndex) get(id string) int32 {
	h := maphash.String(x.seed, id)
	return x.resolve(id, h, x.table[h&x.mask])
}

// resolve is get of id, whose hash is h, from e, the table's slot h
// names.
func (x *idIndex) resolve(id string, h uint64, e idSlot) int32 {
	tag := uint32(h >> 32)
	for i := h & x.mask; ; {
		if e.v == 0 {
			return -1
		}
		if e.tag == tag && x.keys[e.v-1] == id {
			return e.v - 1
		}
		i = (i + 1) & x.mask
		e = x.table[i]
	}
}

// lookupBlock is how many lookups getEach starts before it finishes any.
const lookupBlock = 16

// getEach sets out[i] to get(key(i)) for i in 0..n-1. It hashes a block
// of keys and reads their slots before it compares any key, so that the
// cache misses of a block overlap instead of following one another; a
// key that is the previous one (the same string) is not looked up again.
func (x *idIndex) getEach(n int, key func(i int) string, out []int32) {
	var hs [lookupBlock]uint64
	var first [lookupBlock]idSlot
	var same [lookupBlock]bool
	prev := ""
	for lo := 0; lo < n; lo += lookupBlock {
		hi := min(lo+lookupBlock, n)
		for i := lo; i < hi; i++ {
			id := key(i)
			if same[i-lo] = i > 0 && sameString(id, prev); same[i-lo] {
				continue
			}
			prev = id
			h := maphash.String(x.seed, id)
			hs[i-lo], first[i-lo] = h, x.table[h&x.mask]
		}
		for i := lo; i < hi; i++ {
			if same[i-lo] {
				out[i] = out[i-1]
				continue
			}
			out[i] = x.resolve(key(i), hs[i-lo], first[i-lo])
		}
	}
}
