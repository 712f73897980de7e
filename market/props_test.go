package market

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// world is a random market: offers on two machines (GPU offers of one
// machine may share devices), and a sequence of operations as the fold
// would apply them, each at a time.
type world struct {
	offers []Offer
	ops    []op
}

type op struct {
	kind   string
	at     int64
	offer  int    // request
	renter string // request
	ask    Ask    // request
	target int    // the contract (index) the other kinds act on
	by     int64  // extend
}

func genWorld(monotone bool) *rapid.Generator[world] {
	return rapid.Custom(func(t *rapid.T) world {
		var w world
		nOffers := rapid.IntRange(1, 4).Draw(t, "offers")
		for i := range nOffers {
			o := Offer{
				ID:       fmt.Sprintf("o%d", i),
				Machine:  rapid.SampledFrom([]string{"m1", "m2"}).Draw(t, "machine"),
				CPUs:     rapid.Int64Range(1, 16).Draw(t, "cpus"),
				MemoryMB: rapid.Int64Range(1, 1<<16).Draw(t, "mem"),
				DiskMB:   rapid.Int64Range(0, 1<<12).Draw(t, "disk"),
				Price:    rapid.Int64Range(0, 20_000_000).Draw(t, "price"),
				Until:    rapid.Int64Range(20*Hour, 200*Hour).Draw(t, "until"),
			}
			o.DiskPrice = rapid.Int64Range(0, 1_000_000).Draw(t, "disk_price")
			first := rapid.Int64Range(0, 3).Draw(t, "first_gpu")
			for g := range rapid.Int64Range(0, 4).Draw(t, "gpus") {
				o.GPUs = append(o.GPUs, GPU{Index: first + g, Name: "T4", MemoryMB: 16384})
			}
			w.offers = append(w.offers, o)
		}
		var now int64
		nOps := rapid.IntRange(1, 40).Draw(t, "ops")
		requests := 0
		for range nOps {
			if monotone {
				now += rapid.Int64Range(0, 8*Hour).Draw(t, "dt")
			} else {
				now = rapid.Int64Range(0, 100*Hour).Draw(t, "at")
			}
			kinds := []string{"request"}
			if requests > 0 {
				kinds = append(kinds, "accept", "accept", "reject", "stop", "start", "start", "extend", "rm", "ack", "ack", "witness")
			}
			o := op{kind: rapid.SampledFrom(kinds).Draw(t, "kind"), at: now}
			switch o.kind {
			case "request":
				o.offer = rapid.IntRange(0, nOffers-1).Draw(t, "offer")
				o.renter = rapid.SampledFrom([]string{"alice", "bob", "carol"}).Draw(t, "renter")
				// Mostly asks that fit the offer's shape, some that do not.
				of := w.offers[o.offer]
				if n := int64(len(of.GPUs)); n > 0 {
					o.ask.GPUs = rapid.OneOf(rapid.Int64Range(1, n), rapid.Int64Range(0, 5)).Draw(t, "ask_gpus")
				} else {
					o.ask.CPUs = rapid.OneOf(rapid.Int64Range(1, of.CPUs), rapid.Int64Range(0, 17)).Draw(t, "ask_cpus")
				}
				o.ask.DiskMB = rapid.Int64Range(0, of.DiskMB/3).Draw(t, "ask_disk")
				o.ask.Duration = rapid.SampledFrom([]int64{0, Hour, 5 * Hour, 20 * Hour, 60 * Hour}).Draw(t, "ask_for")
				requests++
			default:
				o.target = rapid.OneOf(rapid.IntRange(max(0, requests-2), requests-1), rapid.IntRange(0, requests-1)).Draw(t, "target")
				o.by = rapid.Int64Range(1, 30*Hour).Draw(t, "by")
			}
			w.ops = append(w.ops, o)
		}
		return w
	})
}

// run folds the operations; a transition that errs has no effect, as in
// the fold. It checks that a failed transition leaves the contract alone.
func run(t *rapid.T, w world, p Policy, after func(cs []Contract, o op)) []Contract {
	var cs []Contract
	for _, o := range w.ops {
		if o.kind == "request" {
			c := Open(fmt.Sprintf("c%d", len(cs)), int64(len(cs)), w.offers[o.offer], o.renter, "host-"+w.offers[o.offer].Machine, o.ask, o.at, cs, p)
			cs = append(cs, c.NameMark(c.ID+"/0"))
		} else {
			c := cs[o.target]
			var next Contract
			var err error
			switch o.kind {
			case "accept":
				next, err = Accept(c, o.at, cs, p)
			case "reject":
				next, err = Reject(c, "no", o.at, p)
			case "stop":
				next, err = Stop(c, o.at, p)
			case "start":
				next, err = Start(c, o.at, cs, p)
			case "extend":
				next, err = Extend(c, o.by, o.at, p)
			case "rm":
				next, err = Remove(c, o.at, p)
			case "ack", "witness":
				var reqs []string
				for _, m := range c.Marks {
					reqs = append(reqs, m.Request)
				}
				if o.kind == "ack" {
					next, err = Ack(c, reqs, o.at)
				} else {
					next, err = Witness(c, reqs, o.at)
				}
			}
			if err == nil {
				next = next.NameMark(fmt.Sprintf("%s/%d", c.ID, len(next.Marks)-1))
			}
			if err != nil {
				if !reflect.DeepEqual(next, c) {
					t.Fatalf("a failed %s changed %s", o.kind, c.ID)
				}
			} else {
				cs[o.target] = next
			}
		}
		if after != nil {
			after(cs, o)
		}
	}
	return cs
}

var policy = Policy{DeleteAfter: 10 * Hour}

// exclusive fails when a GPU, or an offer's cores, is held twice among
// the contracts that run at now (after Resolve); with claims, it checks
// the claims themselves (running, and requested if held is set).
func exclusive(t *rapid.T, cs []Contract, now int64, claims, held bool) {
	waiting := Resolve(cs, now, policy)
	gpus := map[string]string{}
	cores := map[string]int64{}
	for _, c := range cs {
		st := c.State(now, policy)
		if !(st == StateRunning || held && st == StateRequested) || !claims && waiting[c.ID] != "" {
			continue
		}
		for _, g := range c.Alloc.GPUs {
			k := fmt.Sprintf("%s/%d", c.Offer.Machine, g)
			if prev, ok := gpus[k]; ok {
				t.Fatalf("at %s GPU %s is held by %s and %s", FormatDuration(now), k, prev, c.ID)
			}
			gpus[k] = c.ID
		}
		cores[c.Offer.ID] += c.Alloc.CPUs
		if cores[c.Offer.ID] > c.Offer.CPUs {
			t.Fatalf("at %s offer %s's cores are over-held", FormatDuration(now), c.Offer.ID)
		}
	}
	if claims && len(waiting) > 0 {
		t.Fatalf("at %s claims conflict: %v", FormatDuration(now), waiting)
	}
}

// TestNoGPUHeldTwice: whatever the operations and their times, the
// contracts that run at a time (after Resolve) never share a GPU or
// over-hold an offer's cores.
func TestNoGPUHeldTwice(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(false).Draw(t, "world")
		cs := run(t, w, policy, nil)
		for _, now := range []int64{0, Hour, 10 * Hour, 50 * Hour, 100 * Hour, 150 * Hour, 250 * Hour} {
			exclusive(t, cs, now, false, false)
		}
		for _, o := range w.ops {
			exclusive(t, cs, o.at, false, false)
		}
	})
}

// TestClaimsExclusiveOnOneClock: when every entry is dated by one clock
// that never goes back (the host's), the fold's checks alone keep GPUs
// exclusive: no two contracts both hold one (requested or running) from
// each operation's time on, and Resolve has nothing to settle.
func TestClaimsExclusiveOnOneClock(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(true).Draw(t, "world")
		later := rapid.Int64Range(0, 50*Hour).Draw(t, "later")
		run(t, w, policy, func(cs []Contract, o op) {
			exclusive(t, cs, o.at, true, true)
			exclusive(t, cs, o.at+later, true, true)
		})
	})
}

// TestDeterministic: the same operations give the same contracts, and
// Resolve, Reservations and Usage do not depend on the order of the
// contracts they are given.
func TestDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(rapid.Bool().Draw(t, "monotone")).Draw(t, "world")
		a, b := run(t, w, policy, nil), run(t, w, policy, nil)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("two folds of the same operations differ")
		}
		now := rapid.Int64Range(0, 250*Hour).Draw(t, "now")
		shuffled := rapid.Permutation(a).Draw(t, "shuffled")
		if !reflect.DeepEqual(Resolve(a, now, policy), Resolve(shuffled, now, policy)) {
			t.Fatalf("Resolve depends on order")
		}
		if !reflect.DeepEqual(Reservations(a, now, policy), Reservations(shuffled, now, policy)) {
			t.Fatalf("Reservations depends on order")
		}
		r1, h1 := Usage(a, now)
		r2, h2 := Usage(shuffled, now)
		if !reflect.DeepEqual(r1, r2) || !reflect.DeepEqual(h1, h2) {
			t.Fatalf("Usage depends on order")
		}
	})
}

// TestCostsAdditive: usage is the sum of contract costs, renters' and
// hosts' totals agree, a contract's cost never decreases with time and
// stops at its end and at its removal, it runs no longer than it exists
// nor longer than its term, and billing its time in two parts costs the
// same to within a micro-dollar per part.
func TestCostsAdditive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(rapid.Bool().Draw(t, "monotone")).Draw(t, "world")
		cs := run(t, w, policy, nil)
		now := rapid.Int64Range(0, 250*Hour).Draw(t, "now")
		renters, hosts := Usage(cs, now)
		var sum, rs, hs Cost
		for _, c := range cs {
			sum = sum.Add(c.Cost(now))
		}
		for _, a := range renters {
			rs = rs.Add(a.Cost)
		}
		for _, a := range hosts {
			hs = hs.Add(a.Cost)
		}
		if sum != rs || sum != hs {
			t.Fatalf("usage %v (renters) %v (hosts) != sum %v", rs, hs, sum)
		}
		for _, c := range cs {
			if !c.Accepted {
				if c.Cost(now) != (Cost{}) {
					t.Fatalf("%s was never accepted and costs %v", c.ID, c.Cost(now))
				}
				continue
			}
			later := now + rapid.Int64Range(0, 100*Hour).Draw(t, "later")
			if a, b := c.Cost(now), c.Cost(later); b.Compute < a.Compute || b.Storage < a.Storage || a.Total != a.Compute+a.Storage {
				t.Fatalf("%s costs %v at %d and %v later", c.ID, a, now, b)
			}
			if c.Cost(c.End) != c.Cost(c.End+later) {
				t.Fatalf("%s costs more after its end", c.ID)
			}
			for _, m := range c.Marks {
				if at, _ := m.Billed(); m.Removal && c.Cost(at) != c.Cost(at+later) {
					t.Fatalf("%s costs more after its removal at %d", c.ID, at)
				}
			}
			run, exist := c.Billing(c.End)
			if run < 0 || run > exist || exist > c.End-c.Start+AckSlack {
				t.Fatalf("%s ran %d ms, existed %d ms, in a term of %d ms", c.ID, run, exist, c.End-c.Start)
			}
			mid := c.Start + rapid.Int64Range(0, max(0, c.End-c.Start)).Draw(t, "mid")
			runA, existA := c.Billing(mid)
			whole, a := c.Cost(c.End), c.Cost(mid)
			b := Cost{Compute: mulDiv(run-runA, c.Offer.Price, 1, Hour), Storage: mulDiv(exist-existA, c.Offer.DiskPrice, c.Alloc.DiskMB, mbPerGB*Month)}
			if d := whole.Compute - a.Compute - b.Compute; d < 0 || d > 1 {
				t.Fatalf("%s: compute %d != %d + %d", c.ID, whole.Compute, a.Compute, b.Compute)
			}
			if d := whole.Storage - a.Storage - b.Storage; d < 0 || d > 1 {
				t.Fatalf("%s: storage %d != %d + %d", c.ID, whole.Storage, a.Storage, b.Storage)
			}
		}
	})
}

// TestBaselinesWithinOffer: the baselines of the contracts holding an
// offer's units never add up to more than the offer has.
func TestBaselinesWithinOffer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		w := genWorld(true).Draw(t, "world")
		run(t, w, policy, func(cs []Contract, o op) {
			type sum struct{ cpu, mem, shm int64 }
			by := map[string]*sum{}
			for _, c := range cs {
				if !c.Holds(o.at, policy) {
					continue
				}
				s := by[c.Offer.ID]
				if s == nil {
					s = &sum{}
					by[c.Offer.ID] = s
				}
				s.cpu += c.Alloc.CPUMilli
				s.mem += c.Alloc.MemoryMB
				s.shm += c.Alloc.ShmMB
				if s.cpu > c.Offer.CPUs*1000 || s.mem > c.Offer.MemoryMB || s.shm > c.Offer.ShmMB() {
					t.Fatalf("offer %s over-committed: %+v", c.Offer.ID, *s)
				}
			}
		})
	})
}

func genListings() *rapid.Generator[[]Listing] {
	return rapid.Custom(func(t *rapid.T) []Listing {
		n := rapid.IntRange(0, 12).Draw(t, "n")
		out := make([]Listing, n)
		for i := range out {
			o := Offer{
				ID:       fmt.Sprintf("o%02d", i),
				Machine:  rapid.SampledFrom([]string{"m1", "m2", "m3"}).Draw(t, "machine"),
				CPUs:     rapid.Int64Range(1, 64).Draw(t, "cpus"),
				MemoryMB: rapid.SampledFrom([]int64{8192, 16384, 65536}).Draw(t, "mem"),
				DiskMB:   rapid.SampledFrom([]int64{0, 102400, 1048576}).Draw(t, "disk"),
				Price:    rapid.Int64Range(0, 5_000_000).Draw(t, "price"),
				Until:    rapid.Int64Range(Hour, 30*Day).Draw(t, "until"),
			}
			name := rapid.SampledFrom([]string{"RTX 4090", "H100 SXM", "T4"}).Draw(t, "gpu")
			for g := range rapid.Int64Range(0, 4).Draw(t, "gpus") {
				o.GPUs = append(o.GPUs, GPU{Index: g, Name: name, MemoryMB: 24576})
			}
			out[i] = Listing{Offer: o, MachineName: "box-" + o.Machine, Reliability: rapid.Float64Range(0, 1).Draw(t, "rel")}
		}
		return out
	})
}

func genQuery() *rapid.Generator[string] {
	return rapid.Custom(func(t *rapid.T) string {
		var terms []string
		for range rapid.IntRange(0, 4).Draw(t, "terms") {
			f := rapid.SampledFrom(FieldNames()).Draw(t, "field")
			def, _ := lookupField(f)
			val := func() string {
				if def.kind == kindString {
					if f == "machine" {
						return rapid.SampledFrom([]string{"m1", "box-m2", "m3"}).Draw(t, "s")
					}
					return rapid.SampledFrom([]string{"RTX_4090", "H100_SXM", "t4"}).Draw(t, "s")
				}
				switch def.kind {
				case kindSize:
					return rapid.SampledFrom([]string{"0", "16", "24", "64GB", "512MB", "1TB"}).Draw(t, "n")
				case kindDays:
					return rapid.SampledFrom([]string{"0", "1", "3", "36h", "2d"}).Draw(t, "n")
				}
				return rapid.SampledFrom([]string{"0", "1", "2", "0.5", "16", "3"}).Draw(t, "n")
			}
			ops := []string{"==", "=", "!=", "in", "notin"}
			if def.kind != kindString {
				ops = append(ops, "<", "<=", ">=", ">")
			}
			op := rapid.SampledFrom(ops).Draw(t, "op")
			sp := rapid.SampledFrom([]string{"", " "}).Draw(t, "sp")
			var v string
			switch {
			case op == "in" || op == "notin":
				sp = " "
				v = "[" + val() + "," + val() + "]"
			case rapid.IntRange(0, 9).Draw(t, "any") == 0:
				v = "any"
			default:
				v = val()
			}
			terms = append(terms, f+sp+op+sp+v)
		}
		return strings.Join(terms, " ")
	})
}

// TestSearch: generated queries parse and round-trip; Search returns
// exactly the listings that match, in the order asked, whatever the order
// of its input.
func TestSearch(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ls := genListings().Draw(t, "listings")
		text := genQuery().Draw(t, "query")
		q, err := ParseQuery(text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		q2, err := ParseQuery(q.String())
		if err != nil || !reflect.DeepEqual(q, q2) {
			t.Fatalf("%q does not round-trip: %q %v", text, q.String(), err)
		}
		var orders []Order
		for range rapid.IntRange(0, 2).Draw(t, "orders") {
			orders = append(orders, Order{Field: rapid.SampledFrom(FieldNames()).Draw(t, "of"), Desc: rapid.Bool().Draw(t, "desc")})
		}
		now := rapid.Int64Range(0, 40*Day).Draw(t, "now")
		got := Search(ls, q, orders, now)
		if again := Search(rapid.Permutation(ls).Draw(t, "perm"), q, orders, now); !reflect.DeepEqual(got, again) {
			t.Fatalf("search depends on input order")
		}
		n := 0
		for _, l := range ls {
			if q.Match(l, now) {
				n++
			}
		}
		if n != len(got) {
			t.Fatalf("%d match, %d returned", n, len(got))
		}
		for i := range got {
			if !q.Match(got[i], now) {
				t.Fatalf("%s returned but does not match", got[i].Offer.ID)
			}
		}
		if !slices.IsSortedFunc(got, func(a, b Listing) int {
			r := Search([]Listing{b, a}, Query{}, orders, now)
			if r[0].Offer.ID == a.Offer.ID {
				return -1
			}
			return 1
		}) {
			t.Fatalf("not sorted by %s", FormatOrder(orders))
		}
	})
}

// TestResolveClockAhead: the renter of a stopped contract starts it at a
// time of their choosing while another contract holds its GPU by the
// host's clock: at every time, exactly one of them runs when both claim
// the GPU, and it is the one that started first.
func TestResolveClockAhead(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := Offer{ID: "o", Machine: "m", GPUs: []GPU{{Index: 0, Name: "T4", MemoryMB: 1}}, CPUs: 4, MemoryMB: 1024, Price: 1, Until: 100 * Hour}
		t0 := rapid.Int64Range(0, 10*Hour).Draw(t, "t0")
		a := Open("a", 1, o, "alice", "h", Ask{GPUs: 1}, t0, nil, policy)
		a, _ = Accept(a, t0, nil, policy)
		t1 := t0 + rapid.Int64Range(0, 10*Hour).Draw(t, "stop")
		a, _ = Stop(a, t1, policy)
		t2 := t1 + rapid.Int64Range(0, 10*Hour).Draw(t, "b")
		b := Open("b", 2, o, "bob", "h", Ask{GPUs: 1, Duration: rapid.Int64Range(Hour, 20*Hour).Draw(t, "for")}, t2, []Contract{a}, policy)
		b, _ = Accept(b, t2, []Contract{a}, policy)
		t3 := rapid.Int64Range(0, 90*Hour).Draw(t, "start")
		if next, err := Start(a, t3, []Contract{a, b}, policy); err == nil {
			a = next
		}
		cs := []Contract{a, b}
		now := rapid.Int64Range(0, 100*Hour).Draw(t, "now")
		exclusive(t, cs, now, false, false)
		waiting := Resolve(cs, now, policy)
		if a.State(now, policy) == StateRunning && b.State(now, policy) == StateRunning {
			first, second := a, b
			if b.Since < a.Since {
				first, second = b, a
			}
			if waiting[first.ID] != "" || waiting[second.ID] == "" {
				t.Fatalf("both claim at %s: waiting %v; %s started first", FormatDuration(now), waiting, first.ID)
			}
		} else if len(waiting) > 0 {
			t.Fatalf("nothing to settle, yet %v wait", waiting)
		}
	})
}
