package smartshare

import "hash/maphash"

// idIndex maps IDs to small integers: an open-addressing hash table that
// keeps the keys inline, so a lookup touches one table entry and the key's
// bytes (for large inputs it is several times faster than a map). Its seed
// is random, but it only answers lookups: nothing about its layout reaches
// the plan.
type idIndex struct {
	seed  maphash.Seed
	mask  uint64
	table []idEntry
}

type idEntry struct {
	key string
	v   int32 // value+1; 0 is empty
}

// newIDIndex indexes values 0..n-1 by key(v). When keys repeat, the value
// with the smallest better(v) wins. Its table is *buf's array when large
// enough (cleared), and *buf is left holding it.
func newIDIndex(buf *[]idEntry, n int, key func(v int32) string, better func(v int32) int32) *idIndex {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	x := &idIndex{seed: maphash.MakeSeed(), mask: uint64(size - 1), table: zeroed(*buf, size)}
	*buf = x.table
	for v := int32(0); v < int32(n); v++ {
		id := key(v)
		i := maphash.String(x.seed, id) & x.mask
		for {
			e := &x.table[i]
			if e.v == 0 {
				e.key, e.v = id, v+1
				break
			}
			if e.key == id {
				if better(v) < better(e.v-1) {
					e.v = v + 1
				}
				break
			}
			i = (i + 1) & x.mask
		}
	}
	return x
}

// get returns the value of id, or -1.
func (x *idIndex) get(id string) int32 {
	i := maphash.String(x.seed, id) & x.mask
	for {
		e := &x.table[i]
		if e.v == 0 {
			return -1
		}
		if e.key == id {
			return e.v - 1
		}
		i = (i + 1) & x.mask
	}
}
