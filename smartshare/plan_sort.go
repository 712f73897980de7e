package smartshare

import (
	"cmp"
	"unsafe"
)

// radixSort sorts s by key (LSD, 11 bits a pass, skipping passes where all
// keys share the digit); tmp is scratch of the same length.
func radixSort[T any](s, tmp []T, key func(*T) uint64) {
	const bits = 11
	var or, and uint64 = 0, ^uint64(0)
	for i := range s {
		k := key(&s[i])
		or |= k
		and &= k
	}
	var count [1 << bits]int
	for shift := uint(0); shift < 64; shift += bits {
		if (or^and)>>shift&(1<<bits-1) == 0 {
			continue // every key has the same digit here
		}
		clear(count[:])
		for i := range s {
			count[key(&s[i])>>shift&(1<<bits-1)]++
		}
		sum := 0
		for d := range count {
			sum, count[d] = sum+count[d], sum
		}
		for i := range s {
			d := key(&s[i]) >> shift & (1<<bits - 1)
			tmp[count[d]] = s[i]
			count[d]++
		}
		copy(s, tmp)
	}
}

// sameString reports whether a and b are the same string in memory: a cheap
// test that, when false, says nothing (the caller looks the string up).
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

func effPriority(p int) int {
	if p <= 0 {
		return DefaultPriority
	}
	return p
}

// effectiveMax is a job's max_cpus after the default and the limit.
func (p *planner) effectiveMax(m MaxCPUs) int {
	v := p.defMax
	if m.Set {
		v = m.N
	}
	if v < 0 || v > p.limit {
		v = p.limit
	}
	return v
}

func cmpMachineRest(x, y *Machine) int {
	return cmp.Or(cmp.Compare(x.Slots, y.Slots), cmp.Compare(x.Cores, y.Cores),
		cmp.Compare(x.MemoryMB, y.MemoryMB), cmp.Compare(x.GPUs, y.GPUs), cmp.Compare(x.DiskMB, y.DiskMB))
}

func cmpJobRest(x, y *Job) int {
	return cmp.Or(cmp.Compare(x.CPUs, y.CPUs), cmp.Compare(x.MaxCPUs.N, y.MaxCPUs.N),
		cmpBool(x.MaxCPUs.Set, y.MaxCPUs.Set), cmp.Compare(x.ItemsRemaining, y.ItemsRemaining),
		cmp.Compare(x.Cores, y.Cores), cmp.Compare(x.MemoryMB, y.MemoryMB), cmp.Compare(x.GPUs, y.GPUs), cmp.Compare(x.DiskMB, y.DiskMB))
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func clampInt(v, lo, hi int) int { return min(max(v, lo), hi) }

func clamp64(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
