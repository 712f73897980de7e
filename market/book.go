package market

import (
	"cmp"
	"slices"
)

// Reservation is what a machine's running contracts hold at a time, to be
// taken out of its slots and resources before SmartShare plans: the sum
// of their baselines, their GPUs, and a slot per whole core of baseline
// (rounded up).
type Reservation struct {
	Machine   string  `json:"machine"`
	Contracts int     `json:"contracts"`
	Slots     int64   `json:"slots"`
	CPUMilli  int64   `json:"cpu_milli"`
	MemoryMB  int64   `json:"memory_mb"`
	GPUs      []int64 `json:"gpus"`
}

// Reservations sums, per machine (sorted by machine ID), the running
// contracts at now. Contracts in any order give the same result.
func Reservations(cs []Contract, now int64, p Policy) []Reservation {
	by := map[string]*Reservation{}
	for i := range cs {
		c := &cs[i]
		if c.State(now, p) != StateRunning {
			continue
		}
		r := by[c.Offer.Machine]
		if r == nil {
			r = &Reservation{Machine: c.Offer.Machine}
			by[c.Offer.Machine] = r
		}
		r.Contracts++
		r.CPUMilli += c.Alloc.CPUMilli
		r.MemoryMB += c.Alloc.MemoryMB
		r.GPUs = append(r.GPUs, c.Alloc.GPUs...)
	}
	out := make([]Reservation, 0, len(by))
	for _, r := range by {
		r.Slots = (r.CPUMilli + 999) / 1000
		slices.Sort(r.GPUs)
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b Reservation) int { return cmp.Compare(a.Machine, b.Machine) })
	return out
}

// Account is one person's sum over contracts: as renter, what they spent;
// as host, what they earned.
type Account struct {
	Person    string `json:"person"`
	Contracts int    `json:"contracts"`
	Cost      Cost   `json:"cost"`
}

// Usage sums contract costs at now per renter and per host, each sorted by
// person. Contracts never accepted cost nothing and are not counted.
func Usage(cs []Contract, now int64) (renters, hosts []Account) {
	r, h := map[string]*Account{}, map[string]*Account{}
	add := func(m map[string]*Account, person string, cost Cost) {
		a := m[person]
		if a == nil {
			a = &Account{Person: person}
			m[person] = a
		}
		a.Contracts++
		a.Cost = a.Cost.Add(cost)
	}
	for i := range cs {
		if !cs[i].Accepted {
			continue
		}
		cost := cs[i].Cost(now)
		add(r, cs[i].Renter, cost)
		add(h, cs[i].Host, cost)
	}
	return accounts(r), accounts(h)
}

func accounts(m map[string]*Account) []Account {
	out := make([]Account, 0, len(m))
	for _, a := range m {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b Account) int { return cmp.Compare(a.Person, b.Person) })
	return out
}
