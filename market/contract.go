package market

import (
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// Contract states. Requested, running and stopped are recorded facts;
// expired and deleted follow from the clock (State takes now), and a
// request whose offer ended before the host accepted it reads as rejected.
const (
	StateRequested = "requested"
	StateRunning   = "running"
	StateStopped   = "stopped"
	StateExpired   = "expired"
	StateDeleted   = "deleted"
	StateRejected  = "rejected"
)

// ErrState is the class of a transition the contract's state does not
// allow (stopping a stopped contract, starting an expired one, ...). The
// fold keeps such an entry without effect.
var ErrState = errors.New("market: not allowed in the contract's state")

// ErrHeld is the class of a start refused because another contract holds
// the contract's GPUs (or the offer's CPUs) at the time.
var ErrHeld = errors.New("market: resources held")

// stateErr is ErrState for doing verb to a contract in state st.
func stateErr(verb, st string) error {
	article := "a"
	if st == StateExpired {
		article = "an"
	}
	return fmt.Errorf("%w: cannot %s %s %s contract", ErrState, verb, article, st)
}

// DefaultDeleteAfter is how long an expired contract's container and disk
// are kept (seed 002: 48 hours), unless the org sets market.delete_after.
const DefaultDeleteAfter = 48 * Hour

// Policy is the org's market settings the state machine depends on.
type Policy struct {
	// DeleteAfter is how long after its end a contract is deleted, in ms
	// (0: DefaultDeleteAfter).
	DeleteAfter int64 `cbor:"delete_after" json:"delete_after"`
}

func (p Policy) deleteAfter() int64 {
	if p.DeleteAfter <= 0 {
		return DefaultDeleteAfter
	}
	return p.DeleteAfter
}

// Contract is a rental of part of a host machine by a renter, as the
// ledger records it. Seq is its request's position in the ledger's total
// order, which breaks every tie. Times are the unix ms of the entries that
// set them: Start is the host's acceptance, End moves with extensions.
type Contract struct {
	ID        string `cbor:"id" json:"id"`
	Seq       int64  `cbor:"seq" json:"seq"`
	Offer     Offer  `cbor:"offer" json:"offer"`
	Renter    string `cbor:"renter" json:"renter"`
	Host      string `cbor:"host" json:"host"`
	Ask       Ask    `cbor:"ask" json:"ask"`
	Alloc     Alloc  `cbor:"alloc" json:"alloc"`
	Requested int64  `cbor:"requested" json:"requested"`
	Accepted  bool   `cbor:"accepted" json:"accepted"`
	Start     int64  `cbor:"start" json:"start"`
	End       int64  `cbor:"end" json:"end"`
	// Running is the instance's recorded run state: true from acceptance
	// and start, false after stop (and after an extension revives an
	// expired contract, whose GPUs may be another's by then).
	Running bool `cbor:"running" json:"running"`
	// Since is the time of the acceptance or start that last set Running.
	// Of two contracts that both claim a GPU as running at a time (a start
	// folded at a renter's clock ahead of the host's), the earlier Since
	// runs and the other waits (see Resolve).
	Since     int64  `cbor:"since" json:"since"`
	Rejected  bool   `cbor:"rejected" json:"rejected"`
	Reason    string `cbor:"reason,omitempty" json:"reason,omitempty"`
	Removed   bool   `cbor:"removed" json:"removed"`
	RemovedAt int64  `cbor:"removed_at" json:"removed_at"`
}

func (c *Contract) before(d *Contract) bool {
	if c.Seq != d.Seq {
		return c.Seq < d.Seq
	}
	return c.ID < d.ID
}

// Clone deep-copies the contract.
func (c Contract) Clone() Contract {
	c.Offer.GPUs = slices.Clone(c.Offer.GPUs)
	c.Alloc.GPUs = slices.Clone(c.Alloc.GPUs)
	return c
}

// State is the contract's state at now.
func (c Contract) State(now int64, p Policy) string {
	switch {
	case c.Removed:
		return StateDeleted
	case c.Rejected:
		return StateRejected
	case !c.Accepted:
		if now >= c.Offer.Until {
			return StateRejected
		}
		return StateRequested
	case now < c.Start:
		return StateRequested // read at a time before its acceptance
	case now >= c.End+p.deleteAfter():
		return StateDeleted
	case now >= c.End:
		return StateExpired
	case c.Running:
		return StateRunning
	}
	return StateStopped
}

// Why is the reason for the contract's state at now: why it was rejected,
// or "" for any other state.
func (c Contract) Why(now int64, p Policy) string {
	if c.Rejected {
		return c.Reason
	}
	if !c.Removed && !c.Accepted && now >= c.Offer.Until {
		return "the offer ended before the host accepted"
	}
	return ""
}

// Open is the contract a request makes, folded at its place in the
// ledger: at now (the request's time), among the contracts before it
// (others: any order; those of other machines are ignored). A request that
// does not fit the offer's shape, or whose resources are held at now, is
// rejected at once with the reason; otherwise it holds the lowest-indexed
// free GPUs of the offer (or its CPUs) until the host answers. So of two
// requests for the same GPUs the first in ledger order wins, on every
// node alike.
func Open(id string, seq int64, o Offer, renter, host string, ask Ask, now int64, others []Contract, p Policy) Contract {
	c := Contract{ID: id, Seq: seq, Offer: o, Renter: renter, Host: host, Ask: ask, Requested: now}
	reject := func(err error) Contract {
		msg := err.Error()
		for _, class := range []error{ErrOffer, ErrAsk} {
			msg = strings.TrimPrefix(msg, class.Error()+": ")
		}
		c.Rejected, c.Reason = true, oneLine(msg)
		c.Alloc = Alloc{}
		return c
	}
	if err := o.Check(); err != nil {
		return reject(err)
	}
	if !o.Live(now) {
		return reject(errors.New("the offer is not open at the request's time"))
	}
	a, err := Shape(o, ask)
	if err != nil {
		return reject(err)
	}
	if ask.Duration > 0 && ask.Duration > o.Until-now {
		return reject(fmt.Errorf("duration: %s runs past the offer's end, %s after the request", FormatDuration(ask.Duration), FormatDuration(o.Until-now)))
	}
	c.Alloc = a
	h := heldBy(others, &c, now, p)
	if len(o.GPUs) > 0 {
		if err := h.pickGPUs(&c, ask.GPUs); err != nil {
			return reject(err)
		}
	} else if err := h.conflict(&c); err != nil {
		return reject(err)
	}
	if free := o.DiskMB - h.disk[o.ID]; free < a.DiskMB {
		return reject(fmt.Errorf("disk: %d MB asked, %d MB of the offer's %d MB free", a.DiskMB, max(free, 0), o.DiskMB))
	}
	return c
}

// Accept is the host's acceptance at now (the accept entry's time, which
// the host signs): the contract starts now and ends Duration later (or
// when the offer ends). If the contract's resources are held at now by
// another contract (a request folded from a renter's clock ahead of the
// host's, say), the acceptance rejects it instead, naming the holder.
func Accept(c Contract, now int64, others []Contract, p Policy) (Contract, error) {
	if st := c.State(now, p); st != StateRequested {
		return c, stateErr("accept", st)
	}
	c = c.Clone()
	if err := heldBy(others, &c, now, p).conflict(&c); err != nil {
		c.Rejected, c.Reason = true, oneLine(err.Error())
		return c, nil
	}
	c.Accepted, c.Running, c.Start, c.Since = true, true, now, now
	if c.Ask.Duration > 0 {
		c.End = now + c.Ask.Duration
	} else {
		c.End = c.Offer.Until
	}
	return c, nil
}

// Reject is the host's refusal of a requested contract, with its reason.
func Reject(c Contract, reason string, now int64, p Policy) (Contract, error) {
	if st := c.State(now, p); st != StateRequested {
		return c, stateErr("reject", st)
	}
	if reason = oneLine(reason); reason == "" {
		reason = "rejected by the host"
	}
	c.Rejected, c.Reason = true, reason
	return c, nil
}

// Stop stops a running contract: its GPUs are free for others until it
// starts again.
func Stop(c Contract, now int64, p Policy) (Contract, error) {
	if st := c.State(now, p); st != StateRunning {
		return c, stateErr("stop", st)
	}
	c.Running = false
	return c, nil
}

// Start restarts a stopped contract, on its own GPUs, only when no other
// contract holds them at now.
func Start(c Contract, now int64, others []Contract, p Policy) (Contract, error) {
	if st := c.State(now, p); st != StateStopped {
		return c, stateErr("start", st)
	}
	if err := heldBy(others, &c, now, p).conflict(&c); err != nil {
		return c, fmt.Errorf("%w: %s", ErrHeld, err.Error())
	}
	c.Running, c.Since = true, now
	return c, nil
}

// Extend moves the contract's end by d (the host's decision). An expired
// contract extended before its deletion comes back stopped: its GPUs may
// have gone to another contract meanwhile, so the renter starts it again.
func Extend(c Contract, d, now int64, p Policy) (Contract, error) {
	st := c.State(now, p)
	if st != StateRunning && st != StateStopped && st != StateExpired {
		return c, stateErr("extend", st)
	}
	if d <= 0 || c.End-c.Start+d > MaxDuration {
		return c, fmt.Errorf("%w: extend by %s; a contract lasts at most 10 years", ErrState, FormatDuration(d))
	}
	if st == StateExpired {
		if c.End+d <= now {
			return c, fmt.Errorf("%w: extend by %s still ends before now", ErrState, FormatDuration(d))
		}
		c.Running = false
	}
	c.End += d
	return c, nil
}

// Remove deletes the contract (its instance and disk) at now. A contract is
// paid for its whole term: removing it early does not shorten what it
// costs (see Cost).
func Remove(c Contract, now int64, p Policy) (Contract, error) {
	if st := c.State(now, p); st == StateDeleted {
		return c, stateErr("remove", StateDeleted)
	}
	c.Removed, c.RemovedAt = true, now
	return c, nil
}

// Holds reports whether the contract holds its GPUs (or CPUs of a
// CPU-only offer) at now: while requested or running.
func (c Contract) Holds(now int64, p Policy) bool {
	st := c.State(now, p)
	return st == StateRequested || st == StateRunning
}

// Cost is what a contract costs, in micro-dollars: compute is the offer's
// price per hour over the hours of the contract so far (from Start to now,
// at most to End), storage its disk price per GB-month over the same span.
// A removed contract costs its whole term: the term is what the host
// accepted and extended, and nothing the renter signs can shorten it (the
// fold trusts no author's clock for what the author would gain).
type Cost struct {
	Compute int64 `json:"compute"`
	Storage int64 `json:"storage"`
	Total   int64 `json:"total"`
}

// Add sums two costs.
func (a Cost) Add(b Cost) Cost {
	return Cost{Compute: a.Compute + b.Compute, Storage: a.Storage + b.Storage, Total: a.Total + b.Total}
}

// Cost is the contract's cost at now.
func (c Contract) Cost(now int64) Cost {
	if !c.Accepted {
		return Cost{}
	}
	end := c.End
	if !c.Removed {
		end = min(now, c.End)
	}
	ms := max(0, end-c.Start)
	compute := mulDiv(ms, c.Offer.Price, 1, Hour)
	storage := mulDiv(ms, c.Offer.DiskPrice, c.Alloc.DiskMB, mbPerGB*Month)
	return Cost{Compute: compute, Storage: storage, Total: compute + storage}
}

// mulDiv is a*b*c/d rounded down, exactly (the product may exceed 64 bits).
func mulDiv(a, b, c, d int64) int64 {
	var x big.Int
	x.Mul(big.NewInt(a), big.NewInt(b))
	x.Mul(&x, big.NewInt(c))
	x.Quo(&x, big.NewInt(d))
	return x.Int64()
}

// OOMRisk is the plain statement of what bursting above the memory
// baseline risks, as `contract show` prints it.
func (a Alloc) OOMRisk() string {
	if a.MemoryCeilingMB <= a.MemoryMB {
		return "none: the baseline is the whole offer's memory"
	}
	return fmt.Sprintf("memory above the %d MB baseline (up to %d MB) is used only while the machine has it free; processes using it may be killed by the OOM killer when memory runs short", a.MemoryMB, a.MemoryCeilingMB)
}

func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 256 {
		s = strings.ToValidUTF8(s[:256], "")
	}
	return strings.TrimSpace(s)
}
