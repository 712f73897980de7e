package market

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
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

// Reservations sums, per machine (sorted by machine ID), the contracts
// running at now (those Resolve leaves waiting excepted). Contracts in any
// order give the same result.
func Reservations(cs []Contract, now int64, p Policy) []Reservation {
	by := map[string]*Reservation{}
	waiting := Resolve(cs, now, p)
	for i := range cs {
		c := &cs[i]
		if c.State(now, p) != StateRunning || waiting[c.ID] != "" {
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

// Resolve finds the contracts that claim to run at now (State running) but
// must wait: the fold checks every acceptance and start at its entry's
// time, but a renter's clock may run ahead of the host's, so two
// contracts can both claim a GPU (or an offer's cores) at a given now.
// Claims are granted in order of Since (then ledger order): a contract
// whose GPUs or cores are already granted waits, with the reason. Every
// node resolves the same record at the same now alike. The result maps a
// waiting contract's ID to why; the others run as their State says.
func Resolve(cs []Contract, now int64, p Policy) map[string]string {
	var claims []*Contract
	for i := range cs {
		if cs[i].State(now, p) == StateRunning {
			claims = append(claims, &cs[i])
		}
	}
	slices.SortFunc(claims, func(a, b *Contract) int {
		return cmp.Or(cmp.Compare(a.Since, b.Since), cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.ID, b.ID))
	})
	type gpuKey struct {
		machine string
		index   int64
	}
	gpus := map[gpuKey]string{}
	cores := map[string]int64{}
	waiting := map[string]string{}
	for _, c := range claims {
		var held []string
		for _, g := range c.Alloc.GPUs {
			if by, ok := gpus[gpuKey{c.Offer.Machine, g}]; ok {
				held = append(held, fmt.Sprintf("GPU %d is held by contract %s", g, by))
			}
		}
		if c.Alloc.CPUs > 0 && cores[c.Offer.ID]+c.Alloc.CPUs > c.Offer.CPUs {
			held = append(held, fmt.Sprintf("the offer's CPUs are held by other contracts (%d of %d)", cores[c.Offer.ID], c.Offer.CPUs))
		}
		if len(held) > 0 {
			waiting[c.ID] = "waiting: " + strings.Join(held, ", ")
			continue
		}
		for _, g := range c.Alloc.GPUs {
			gpus[gpuKey{c.Offer.Machine, g}] = c.ID
		}
		cores[c.Offer.ID] += c.Alloc.CPUs
	}
	return waiting
}
