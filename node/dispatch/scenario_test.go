package dispatch

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/cshare/cshare/ledger"
)

// TestScenarios runs the scripts in testdata (regenerate the expected
// output with -rewrite). The language:
//
//	job n=10 [start=100]            a job of n pending items (starts over)
//	status done=1,2 failed=3 [pending=4]  set item statuses, by index
//	plan                            the plan's owners, in order, one or more
//	m1/0 m1/1 m2/0                  per line (no lines: no plan)
//	prev age=500ms                  the previous plan's owners and the time
//	m1/0 m2/0                       since the plan changed (no lines: none)
//	lease 103,104 / unlease 103|all leased items (by item number)
//	alive                           the running owners (no lines: every
//	m1/0 m2/0                       planned one, and the one asking)
//	owners                          each planned slot's items, ascending
//	takers                          each free orphan's takers (Ring.Takers)
//	next slot=m1/0 now=1s [take]    the slot's next item; take leases it
//	round now=1s                    every alive planned slot, in plan order,
//	                                from one view; each takes its item
func TestScenarios(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s := &scenario{}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return s.run(t, d)
			})
		})
	}
}

var epoch = time.Unix(1_700_000_000, 0)

type scenario struct {
	job     string
	items   []ledger.Item
	start   int64
	owners  *Owners
	prev    *Owners
	planAge time.Duration
	leased  map[int64]bool
	alive   map[Slot]bool // nil: the default
	cursors map[Slot]*Cursor
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "job":
		var n int
		d.ScanArgs(t, "n", &n)
		*s = scenario{job: "job", items: make([]ledger.Item, n), leased: map[int64]bool{}, cursors: map[Slot]*Cursor{}}
		if d.HasArg("start") {
			d.ScanArgs(t, "start", &s.start)
		}
		return fmt.Sprintf("%d items from %d", n, s.start)
	case "status":
		for _, a := range d.CmdArgs {
			st, ok := map[string]uint8{"pending": ledger.ItemPending, "done": ledger.ItemDone, "failed": ledger.ItemFailed}[a.Key]
			if !ok {
				t.Fatalf("unknown status %q", a.Key)
			}
			for _, v := range a.Vals {
				for _, x := range strings.Split(v, ",") {
					s.items[atoi(t, x)].Status = st
				}
			}
		}
		return s.statuses()
	case "plan":
		s.owners = s.newOwners(t, d.Input)
		return fmt.Sprintf("%d owners", len(s.owners.Slots))
	case "prev":
		s.prev = s.newOwners(t, d.Input)
		if d.HasArg("age") {
			s.planAge = duration(t, d, "age")
		}
		return fmt.Sprintf("%d owners, plan age %s", len(s.prev.Slots), s.planAge)
	case "lease", "unlease":
		for _, a := range d.CmdArgs {
			if a.Key == "all" {
				clear(s.leased)
				continue
			}
			for _, x := range strings.Split(a.Key, ",") {
				s.leased[int64(atoi(t, x))] = d.Cmd == "lease"
			}
		}
		return "leased: " + s.leasedList()
	case "alive":
		s.alive = nil
		if ss := parseSlots(t, d.Input); len(ss) > 0 {
			s.alive = map[Slot]bool{}
			for _, k := range ss {
				s.alive[k] = true
			}
		}
		return "ok"
	case "owners":
		var b strings.Builder
		bk := NewBuckets(len(s.items))
		for k, sl := range s.owners.Slots {
			fmt.Fprintf(&b, "%s:", sl)
			for _, i := range s.owners.Ring.ItemsOf(bk, k) {
				fmt.Fprintf(&b, " %d", s.start+int64(i))
				if s.prev != nil && len(s.prev.Slots) > 0 {
					if p := s.prev.Ring.OwnerOf(int(i)); p >= len(s.prev.Slots) || s.prev.Slots[p] != sl {
						b.WriteString("*") // changed owner
					}
				}
			}
			b.WriteString("\n")
		}
		return b.String()
	case "takers":
		var b strings.Builder
		runs := func(o int) bool { return s.view(Slot{}).Alive(s.owners.Slots[o]) }
		for i, it := range s.items {
			if it.Status != ledger.ItemPending || s.leased[s.start+int64(i)] || runs(s.owners.Ring.OwnerOf(i)) {
				continue
			}
			fmt.Fprintf(&b, "%d:", s.start+int64(i))
			for _, o := range s.owners.Ring.Takers(i, runs, len(s.owners.Slots), nil) {
				fmt.Fprintf(&b, " %s", s.owners.Slots[o])
			}
			b.WriteString("\n")
		}
		return b.String()
	case "next":
		var slot string
		d.ScanArgs(t, "slot", &slot)
		sl := parseSlot(t, slot)
		it, ok := Next(s.view(sl), s.cursor(sl), epoch.Add(duration(t, d, "now")))
		if ok && d.HasArg("take") {
			s.leased[it] = true
		}
		return s.took(sl, it, ok)
	case "round":
		now := epoch.Add(duration(t, d, "now"))
		var b strings.Builder
		var taken []int64
		for _, sl := range s.owners.Slots {
			if s.alive != nil && !s.alive[sl] {
				continue
			}
			it, ok := Next(s.view(sl), s.cursor(sl), now) // the same view: nobody sees this round's leases
			if ok {
				taken = append(taken, it)
			}
			b.WriteString(s.took(sl, it, ok) + "\n")
		}
		for _, it := range taken {
			s.leased[it] = true
		}
		return b.String()
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

func (s *scenario) view(sl Slot) View {
	return View{
		Items: ledger.ItemsOf(s.items...), RangeStart: s.start,
		Leased: func(it int64) bool { return s.leased[it] },
		Alive: func(k Slot) bool {
			if s.alive != nil {
				return s.alive[k]
			}
			_, planned := s.owners.Rank[k]
			return planned || k == sl
		},
		Slot: sl, Owners: s.owners, Prev: s.prev, PlanAge: s.planAge,
	}
}

func (s *scenario) cursor(sl Slot) *Cursor {
	if s.cursors[sl] == nil {
		s.cursors[sl] = &Cursor{}
	}
	return s.cursors[sl]
}

func (s *scenario) took(sl Slot, it int64, ok bool) string {
	c := s.cursors[sl]
	out := fmt.Sprintf("%s -> none", sl)
	if ok {
		out = fmt.Sprintf("%s -> %d", sl, it)
	}
	out += fmt.Sprintf(" (cursor %d, tail %d", c.Cursor, c.Tail)
	if !c.IdleSince.IsZero() {
		out += fmt.Sprintf(", idle since %s", c.IdleSince.Sub(epoch))
	}
	if c.Orphans != 0 {
		out += fmt.Sprintf(", orphans since %s", c.OrphansSince.Sub(epoch))
	}
	return out + ")"
}

func (s *scenario) newOwners(t *testing.T, input string) *Owners {
	slots := parseSlots(t, input)
	return NewOwners(slots, NewRing(Seeds(s.job, slots)))
}

func (s *scenario) statuses() string {
	var b strings.Builder
	for _, it := range s.items {
		b.WriteByte(".DF"[it.Status])
	}
	return b.String()
}

func (s *scenario) leasedList() string {
	var l []int64
	for it, ok := range s.leased {
		if ok {
			l = append(l, it)
		}
	}
	slices.Sort(l)
	return fmt.Sprint(l)
}

func parseSlots(t *testing.T, input string) []Slot {
	var out []Slot
	for _, f := range strings.Fields(input) {
		out = append(out, parseSlot(t, f))
	}
	return out
}

func parseSlot(t *testing.T, s string) Slot {
	m, n, ok := strings.Cut(s, "/")
	if !ok {
		t.Fatalf("slot %q: want machine/slot", s)
	}
	return Slot{m, atoi(t, n)}
}

func atoi(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

func duration(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	var v string
	d.ScanArgs(t, key, &v)
	dur, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%s: %v", key, v, err)
	}
	return dur
}
