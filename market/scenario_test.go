package market

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestScenarios runs the scripts in testdata (regenerate the expected
// output with -rewrite). Times are durations from 0; sizes are GB. The
// language:
//
//	policy delete-after=48h            the org's market settings
//	offer id=o1 machine=m1 [name=] [gpus=RTX_4090:24,...] cpus=16 memory=64
//	      disk=500 price=1.5 [disk-price=0.1] [from=0s] until=48h [min=1h]
//	      [reliability=0.99]           add a listing; prints Check's verdict
//	fits id=o1 cpus= memory= disk= [gpus=...]  Offer.Fits on that hardware
//	query [now=0s] [o=price,gpus-]     ParseQuery of the input, then Search
//	<query>                            over the listings; ids, or the error
//	request id=c1 offer=o1 renter=r [host=h] [gpus=] [cpus=] [disk=] [for=] at=
//	accept|stop|start|rm id= at=       the transitions; print the contract
//	      [ack=] [witness=]            or the error (ErrState: no effect);
//	                                   the move acknowledged by the host
//	                                   (stop, start, rm) or witnessed by a
//	                                   third machine at those times
//	ack|witness id= at= [move=N]       the host's acknowledgement or a
//	                                   witness of every pending move (or
//	                                   move N, from 0: the request)
//	reject id= at= [reason=]
//	extend id= by=24h at=
//	show now=                          every contract, in ledger order
//	reserve now=                       Reservations
//	usage now=                         Usage: renters, then hosts
func TestScenarios(t *testing.T) {
	paths, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			s := &scenario{offers: map[string]Offer{}}
			datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
				return s.run(t, d)
			})
		})
	}
}

type scenario struct {
	policy    Policy
	offers    map[string]Offer
	listings  []Listing
	contracts []Contract
}

func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "policy":
		s.policy.DeleteAfter = dur(t, d, "delete-after")
		return "delete_after " + FormatDuration(s.policy.DeleteAfter)
	case "offer":
		o := Offer{
			ID: arg(t, d, "id"), Machine: arg(t, d, "machine"),
			CPUs: num(t, d, "cpus"), MemoryMB: num(t, d, "memory") * 1024, DiskMB: num(t, d, "disk") * 1024,
			Price: money(t, d, "price"), Until: dur(t, d, "until"),
		}
		if d.HasArg("gpus") {
			o.GPUs = gpus(t, arg(t, d, "gpus"))
		}
		if d.HasArg("disk-price") {
			o.DiskPrice = money(t, d, "disk-price")
		}
		if d.HasArg("from") {
			o.Created = dur(t, d, "from")
		}
		if d.HasArg("min") {
			o.MinDuration = dur(t, d, "min")
		}
		if err := o.Check(); err != nil {
			return err.Error()
		}
		l := Listing{Offer: o, Reliability: 1}
		if d.HasArg("name") {
			l.MachineName = arg(t, d, "name")
		}
		if d.HasArg("reliability") {
			l.Reliability, _ = strconv.ParseFloat(arg(t, d, "reliability"), 64)
		}
		s.offers[o.ID] = o
		s.listings = append(s.listings, l)
		return o.ID + ": ok"
	case "fits":
		hw := Hardware{CPUs: num(t, d, "cpus"), MemoryMB: num(t, d, "memory") * 1024, DiskMB: num(t, d, "disk") * 1024}
		if d.HasArg("gpus") {
			hw.GPUs = gpus(t, arg(t, d, "gpus"))
		}
		if err := s.offer(t, arg(t, d, "id")).Fits(hw); err != nil {
			return err.Error()
		}
		return "fits"
	case "query":
		var now int64
		if d.HasArg("now") {
			now = dur(t, d, "now")
		}
		q, err := ParseQuery(strings.TrimSpace(d.Input))
		if err != nil {
			return err.Error()
		}
		var orders []Order
		if d.HasArg("o") {
			if orders, err = ParseOrder(arg(t, d, "o")); err != nil {
				return err.Error()
			}
		}
		// The canonical form parses to the same query.
		if q2, err := ParseQuery(q.String()); err != nil || q2.String() != q.String() {
			t.Fatalf("%q does not round-trip: %q, %v", q.String(), q2.String(), err)
		}
		res := Search(s.listings, q, orders, now)
		// Search does not depend on the listings' order.
		rev := slices.Clone(s.listings)
		slices.Reverse(rev)
		if got := Search(rev, q, orders, now); !slices.EqualFunc(got, res, func(a, b Listing) bool { return a.Offer.ID == b.Offer.ID }) {
			t.Fatalf("search depends on the order of the listings")
		}
		if len(res) == 0 {
			return "(none)"
		}
		var b strings.Builder
		for _, l := range res {
			o := l.Offer
			fmt.Fprintf(&b, "%s %s gpus=%d %s cpus=%d mem=%dGB disk=%dGB $%s/h until=%s rel=%g\n",
				o.ID, o.Machine, len(o.GPUs), strings.ReplaceAll(cmpOr(o.GPUName(), "-"), " ", "_"), o.CPUs,
				o.MemoryMB/1024, o.DiskMB/1024, FormatMoney(o.Price), FormatDuration(o.Until), l.Reliability)
		}
		return b.String()
	case "request":
		o := s.offer(t, arg(t, d, "offer"))
		ask := Ask{}
		if d.HasArg("gpus") {
			ask.GPUs = num(t, d, "gpus")
		}
		if d.HasArg("cpus") {
			ask.CPUs = num(t, d, "cpus")
		}
		if d.HasArg("disk") {
			ask.DiskMB = num(t, d, "disk") * 1024
		}
		if d.HasArg("for") {
			ask.Duration = dur(t, d, "for")
		}
		host := "host"
		if d.HasArg("host") {
			host = arg(t, d, "host")
		}
		c := Open(arg(t, d, "id"), int64(len(s.contracts)+1), o, arg(t, d, "renter"), host, ask, dur(t, d, "at"), s.contracts, s.policy)
		c = c.NameMark(c.ID + "/0")
		s.contracts = append(s.contracts, c)
		return s.line(c, c.Requested)
	case "accept", "reject", "stop", "start", "rm", "extend":
		i := s.find(t, arg(t, d, "id"))
		at := dur(t, d, "at")
		c, err := s.contracts[i], error(nil)
		switch d.Cmd {
		case "accept":
			c, err = Accept(c, at, s.contracts, s.policy)
		case "reject":
			reason := ""
			if d.HasArg("reason") {
				reason = strings.ReplaceAll(arg(t, d, "reason"), "_", " ")
			}
			c, err = Reject(c, reason, at, s.policy)
		case "stop":
			c, err = Stop(c, at, s.policy)
		case "start":
			c, err = Start(c, at, s.contracts, s.policy)
		case "rm":
			c, err = Remove(c, at, s.policy)
		case "extend":
			c, err = Extend(c, dur(t, d, "by"), at, s.policy)
		}
		if err != nil {
			if c.ID != s.contracts[i].ID || c.State(at, s.policy) != s.contracts[i].State(at, s.policy) {
				t.Fatalf("a failed %s changed the contract", d.Cmd)
			}
			return "error: " + err.Error()
		}
		c = c.NameMark(fmt.Sprintf("%s/%d", c.ID, len(c.Marks)-1))
		for _, x := range []struct {
			key string
			fn  func(Contract, []string, int64) (Contract, error)
		}{{"witness", Witness}, {"ack", Ack}} {
			if d.HasArg(x.key) {
				if c, err = x.fn(c, []string{c.Marks[len(c.Marks)-1].Request}, dur(t, d, x.key)); err != nil {
					t.Fatalf("%s: %v", x.key, err)
				}
				at = max(at, dur(t, d, x.key)) // shown once acknowledged or witnessed
			}
		}
		s.contracts[i] = c
		return s.line(c, at)
	case "ack", "witness":
		i := s.find(t, arg(t, d, "id"))
		c := s.contracts[i]
		var reqs []string
		for k, m := range c.Marks {
			if d.HasArg("move") && int64(k) != num(t, d, "move") {
				continue
			}
			reqs = append(reqs, m.Request)
		}
		fn := Ack
		if d.Cmd == "witness" {
			fn = Witness
		}
		c, err := fn(c, reqs, dur(t, d, "at"))
		if err != nil {
			return "error: " + err.Error()
		}
		s.contracts[i] = c
		return s.line(c, dur(t, d, "at"))
	case "show":
		now := dur(t, d, "now")
		waiting := Resolve(s.contracts, now, s.policy)
		var b strings.Builder
		for _, c := range s.contracts {
			b.WriteString(s.line(c, now))
			if w := waiting[c.ID]; w != "" {
				b.WriteString(" (" + w + ")")
			}
			b.WriteString("\n")
		}
		return b.String()
	case "reserve":
		var b strings.Builder
		for _, r := range Reservations(s.contracts, dur(t, d, "now"), s.policy) {
			fmt.Fprintf(&b, "%s: contracts=%d slots=%d cpu=%dm mem=%dMB gpus=%s\n", r.Machine, r.Contracts, r.Slots, r.CPUMilli, r.MemoryMB, FormatGPUs(r.GPUs))
		}
		return cmpOr(b.String(), "(none)")
	case "usage":
		now := dur(t, d, "now")
		renters, hosts := Usage(s.contracts, now)
		var b strings.Builder
		for _, x := range []struct {
			role string
			as   []Account
		}{{"renter", renters}, {"host", hosts}} {
			for _, a := range x.as {
				fmt.Fprintf(&b, "%s %s: contracts=%d compute=$%s storage=$%s total=$%s\n", x.role, a.Person, a.Contracts,
					FormatMoney(a.Cost.Compute), FormatMoney(a.Cost.Storage), FormatMoney(a.Cost.Total))
			}
		}
		return cmpOr(b.String(), "(none)")
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}

func (s *scenario) line(c Contract, now int64) string {
	st := c.State(now, s.policy)
	out := fmt.Sprintf("%s: %s", c.ID, st)
	if st == StateRejected {
		return out + ": " + c.Why(now, s.policy)
	}
	a := c.Alloc
	out += fmt.Sprintf(" gpus=%s cpu=%dm/%dm mem=%d/%dMB shm=%dMB disk=%dMB", FormatGPUs(a.GPUs), a.CPUMilli, a.CPUCeilingMilli, a.MemoryMB, a.MemoryCeilingMB, a.ShmMB, a.DiskMB)
	if a.CPUs > 0 {
		out += fmt.Sprintf(" cores=%d", a.CPUs)
	}
	if c.Accepted {
		cost := c.Cost(now)
		run, _ := c.Billing(now)
		out += fmt.Sprintf(" start=%s end=%s ran=%s cost=$%s+$%s", FormatDuration(c.Start), FormatDuration(c.End), FormatDuration(run), FormatMoney(cost.Compute), FormatMoney(cost.Storage))
	}
	return out
}

func (s *scenario) find(t *testing.T, id string) int {
	for i, c := range s.contracts {
		if c.ID == id {
			return i
		}
	}
	t.Fatalf("no contract %s", id)
	return 0
}

func (s *scenario) offer(t *testing.T, id string) Offer {
	o, ok := s.offers[id]
	if !ok {
		t.Fatalf("no offer %s", id)
	}
	return o
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func arg(t *testing.T, d *datadriven.TestData, key string) string {
	var v string
	d.ScanArgs(t, key, &v)
	return v
}

func num(t *testing.T, d *datadriven.TestData, key string) int64 {
	n, err := strconv.ParseInt(arg(t, d, key), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return n
}

func money(t *testing.T, d *datadriven.TestData, key string) int64 {
	m, err := ParseMoney(arg(t, d, key))
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return m
}

func dur(t *testing.T, d *datadriven.TestData, key string) int64 {
	x, err := time.ParseDuration(arg(t, d, key))
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return x.Milliseconds()
}

// gpus reads "RTX_4090:24,H100:80" (name:GB), indices from 0.
func gpus(t *testing.T, s string) []GPU {
	var out []GPU
	for i, p := range strings.Split(s, ",") {
		name, gb, ok := strings.Cut(p, ":")
		n, err := strconv.ParseInt(gb, 10, 64)
		if !ok || err != nil {
			t.Fatalf("gpu %q: want name:GB", p)
		}
		out = append(out, GPU{Index: int64(i), Name: strings.ReplaceAll(name, "_", " "), MemoryMB: n * 1024})
	}
	return out
}
