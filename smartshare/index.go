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
	tag := uint32(h >> 32)
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		e := x.table[i]
		if e.v == 0 {
			return -1
		}
		if e.tag == tag && x.keys[e.v-1] == id {
			return e.v - 1
		}
	}
}
