package smartshare

import "hash/maphash"

// idIndex maps IDs to small integers (an open-addressing hash table over
// int32, faster and smaller than a map[string]int32 for large inputs). Its
// seed is random, but it only answers lookups: nothing about its layout
// reaches the plan.
type idIndex struct {
	seed  maphash.Seed
	mask  uint64
	table []int32 // value+1; 0 is empty
	key   func(v int32) string
}

// newIDIndex indexes values 0..n-1, whose IDs key(v) gives; when IDs
// repeat, the smallest value wins.
func newIDIndex(n int, key func(v int32) string) *idIndex {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	x := &idIndex{seed: maphash.MakeSeed(), mask: uint64(size - 1), table: make([]int32, size), key: key}
	for v := int32(0); v < int32(n); v++ {
		id := key(v)
		i := maphash.String(x.seed, id) & x.mask
		for {
			e := x.table[i]
			if e == 0 {
				x.table[i] = v + 1
				break
			}
			if key(e-1) == id {
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
		e := x.table[i]
		if e == 0 {
			return -1
		}
		if x.key(e-1) == id {
			return e - 1
		}
		i = (i + 1) & x.mask
	}
}
