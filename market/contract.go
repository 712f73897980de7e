package market

import (
	"errors"
	"fmt"
	"math"
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

// ErrDuration is the class of an extension whose duration is out of
// range: not positive, past the ten years a contract lasts at most, or
// still ending before now. It is the asker's value at fault (the API names
// the field), not the contract's state.
var ErrDuration = errors.New("market: duration out of range")

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
// are kept (48 hours, docs/design.md §14), unless the org sets market.delete_after.
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
	return min(p.DeleteAfter, MaxDuration) // the fold refuses more; a hand-made policy is capped
}

// checkTime refuses a transition's time outside 0..MaxTime: every time the
// market adds a duration to is bounded so, and no sum can overflow.
func checkTime(now int64) error {
	if now < 0 || now > MaxTime {
		return fmt.Errorf("%w: time %d ms is outside 0..%d (unix ms up to the year 9999)", ErrState, now, int64(MaxTime))
	}
	return nil
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
	// Marks are the moves billing counts, in ledger order (billing.go):
	// the request, and each start, stop and removal.
	Marks []Mark `cbor:"marks,omitempty" json:"marks,omitempty"`
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
	c.Marks = slices.Clone(c.Marks)
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
	case c.End <= math.MaxInt64-p.deleteAfter() && now >= c.End+p.deleteAfter():
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
	if c.Rejected || c.Removed {
		return c.Reason // a removal's reason is set only when Terminate ended it
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
	c := Contract{ID: id, Seq: seq, Offer: o, Renter: renter, Host: host, Ask: ask, Requested: now,
		Marks: []Mark{{Kind: MarkStart, At: now}}}
	reject := func(err error) Contract {
		msg := err.Error()
		for _, class := range []error{ErrOffer, ErrAsk} {
			msg = strings.TrimPrefix(msg, class.Error()+": ")
		}
		c.Rejected, c.Reason = true, oneLine(msg)
		c.Alloc = Alloc{}
		return c
	}
	if checkTime(now) != nil {
		c.Requested = 0 // no time out of range is recorded
		return reject(errors.New("the request's time is outside 1970..9999"))
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
	if err := checkTime(now); err != nil {
		return c, err
	}
	if st := c.State(now, p); st != StateRequested {
		return c, stateErr("accept", st)
	}
	if now < c.Offer.Created {
		// Else it would run from before its offer, longer than the
		// offer's window, up to the ten years' limit and past it.
		return c, fmt.Errorf("%w: cannot accept a contract before its offer opens", ErrState)
	}
	c = c.Clone()
	if err := heldBy(others, &c, now, p).conflict(&c); err != nil {
		return rejected(c, err.Error()), nil
	}
	c.Accepted, c.Running, c.Start, c.Since = true, true, now, now
	// The acceptance acknowledges the request: billing starts here.
	if len(c.Marks) == 0 {
		c = c.mark(MarkStart, c.Requested, false)
	}
	c.Marks[0].Acked, c.Marks[0].Ack = true, now
	if c.Ask.Duration > 0 {
		c.End = now + c.Ask.Duration
	} else {
		c.End = c.Offer.Until
	}
	return c, nil
}

// Reject is the host's refusal of a requested contract, with its reason.
func Reject(c Contract, reason string, now int64, p Policy) (Contract, error) {
	if err := checkTime(now); err != nil {
		return c, err
	}
	if st := c.State(now, p); st != StateRequested {
		return c, stateErr("reject", st)
	}
	if reason = oneLine(reason); reason == "" {
		reason = "rejected by the host"
	}
	return rejected(c, reason), nil
}

// rejected is c refused with reason: it holds nothing from then on, so no
// message can name it as the holder of a GPU or of an offer's cores, and
// no view lists devices for it.
func rejected(c Contract, reason string) Contract {
	c.Rejected, c.Reason = true, oneLine(reason)
	c.Alloc.GPUs, c.Alloc.CPUs = nil, 0
	return c
}

// Stop stops a running contract: its GPUs are free for others until it
// starts again.
func Stop(c Contract, now int64, p Policy) (Contract, error) {
	if err := checkTime(now); err != nil {
		return c, err
	}
	if st := c.State(now, p); st != StateRunning {
		return c, stateErr("stop", st)
	}
	c.Running = false
	return c.mark(MarkStop, now, false), nil
}

// Start restarts a stopped contract, on its own GPUs, only when no other
// contract holds them at now.
func Start(c Contract, now int64, others []Contract, p Policy) (Contract, error) {
	if err := checkTime(now); err != nil {
		return c, err
	}
	if st := c.State(now, p); st != StateStopped {
		return c, stateErr("start", st)
	}
	if err := heldBy(others, &c, now, p).conflict(&c); err != nil {
		return c, fmt.Errorf("%w: %s", ErrHeld, err.Error())
	}
	c.Running, c.Since = true, now
	return c.mark(MarkStart, now, false), nil
}

// Extend moves the contract's end by d (the host's decision). An expired
// contract extended before its deletion comes back stopped: its GPUs may
// have gone to another contract meanwhile, so the renter starts it again.
//
// Every figure is compared before it is added: d is at most what the
// contract's ten years leave (ExtendLimit), so the new end cannot
// overflow, and an error wrapping ErrDuration says d is at fault.
func Extend(c Contract, d, now int64, p Policy) (Contract, error) {
	if err := checkTime(now); err != nil {
		return c, err
	}
	st := c.State(now, p)
	if st != StateRunning && st != StateStopped && st != StateExpired {
		return c, stateErr("extend", st)
	}
	if limit := c.ExtendLimit(); d <= 0 || d > limit {
		return c, fmt.Errorf("%w: extend by %s; a positive duration of at most %s (a contract lasts at most 10 years)", ErrDuration, FormatDuration(d), FormatDuration(limit))
	}
	if st == StateExpired {
		if c.End <= now-d { // c.End+d <= now, without the sum
			return c, fmt.Errorf("%w: extend by %s still ends before now", ErrDuration, FormatDuration(d))
		}
		if c.Running {
			// It stopped running at its end, as both sides agree: a stop
			// there, acknowledged, so billing does not resume with the
			// new end.
			c = c.mark(MarkStop, c.End, false)
			c.Marks[len(c.Marks)-1].Acked, c.Marks[len(c.Marks)-1].Ack = true, c.End
		}
		c.Running = false
	}
	c.End += d
	return c, nil
}

// ExtendLimit is the most the contract may still be extended by: a
// contract lasts at most MaxDuration from its start. 0 for a contract
// never accepted or already at its limit.
func (c Contract) ExtendLimit() int64 {
	if !c.Accepted || c.End < c.Start || c.End-c.Start >= MaxDuration {
		return 0
	}
	return MaxDuration - (c.End - c.Start)
}

// Remove deletes the contract (its instance and disk) at now: nothing is
// billed after the removal (its mark; see billing.go).
func Remove(c Contract, now int64, p Policy) (Contract, error) {
	if err := checkTime(now); err != nil {
		return c, err
	}
	if st := c.State(now, p); st == StateDeleted {
		return c, stateErr("remove", StateDeleted)
	}
	c.Removed, c.RemovedAt = true, now
	if !c.Accepted {
		return c, nil
	}
	return c.mark(MarkStop, now, true), nil
}

// Terminate ends the contract at now for a reason outside the market (its
// renter or host left the org, or the org was deleted): a request not yet
// accepted is rejected with reason, and an accepted contract is deleted at
// now, its end moved back to now when later, so it costs nothing after
// now and its instance goes. A contract already deleted at now, or a now
// outside 0..MaxTime, leaves it as it is.
func Terminate(c Contract, now int64, reason string, p Policy) Contract {
	if checkTime(now) != nil || c.State(now, p) == StateDeleted {
		return c
	}
	c = c.Clone()
	if !c.Accepted {
		if !c.Rejected {
			c = rejected(c, reason)
		}
		return c
	}
	if now < c.End {
		c.End = max(now, c.Start)
	}
	c.Running, c.Removed, c.RemovedAt, c.Reason = false, true, now, oneLine(reason)
	return c
}

// Holds reports whether the contract holds its GPUs (or CPUs of a
// CPU-only offer) at now: while requested or running.
func (c Contract) Holds(now int64, p Policy) bool {
	st := c.State(now, p)
	return st == StateRequested || st == StateRunning
}

// Cost is what a contract costs, in micro-dollars, by the millisecond:
// compute is the offer's price per hour over the time it ran, storage its
// disk price per GB-month over the time it existed (running or stopped),
// both within its term and never after its removal, from the times its
// marks bill (billing.go).
type Cost struct {
	Compute int64 `json:"compute"`
	Storage int64 `json:"storage"`
	Total   int64 `json:"total"`
}

// Add sums two costs; a sum past the largest int64 stays there.
func (a Cost) Add(b Cost) Cost {
	return Cost{Compute: satAdd(a.Compute, b.Compute), Storage: satAdd(a.Storage, b.Storage), Total: satAdd(a.Total, b.Total)}
}

// Cost is the contract's cost at now: never negative, and at most the
// largest int64 (past it, it saturates).
func (c Contract) Cost(now int64) Cost {
	if !c.Accepted {
		return Cost{}
	}
	run, exist := c.Billing(now)
	compute := mulDiv(run, c.Offer.Price, 1, Hour)
	storage := mulDiv(exist, c.Offer.DiskPrice, c.Alloc.DiskMB, mbPerGB*Month)
	return Cost{Compute: compute, Storage: storage, Total: satAdd(compute, storage)}
}

// CheckFigures reports the first of c's figures out of range at now, or
// nil: a time outside 0..MaxTime, an end before the start or more than
// MaxDuration after it, a rejected contract holding resources, a negative
// cost, or a contract nobody removed read as deleted before its end. The
// market's and the fold's properties check it for any figures and times.
func (c Contract) CheckFigures(now int64, p Policy) error {
	cost := c.Cost(now)
	switch {
	case c.Requested < 0 || c.Requested > MaxTime:
		return fmt.Errorf("contract %s requested at %d", c.ID, c.Requested)
	case c.Accepted && (c.Start < 0 || c.Start > MaxTime || c.End < c.Start || c.End-c.Start > MaxDuration):
		return fmt.Errorf("contract %s runs from %d to %d", c.ID, c.Start, c.End)
	case c.Removed && (c.RemovedAt < 0 || c.RemovedAt > MaxTime):
		return fmt.Errorf("contract %s removed at %d", c.ID, c.RemovedAt)
	case c.Rejected && (len(c.Alloc.GPUs) > 0 || c.Alloc.CPUs > 0):
		return fmt.Errorf("rejected contract %s holds GPUs %v and %d CPUs", c.ID, c.Alloc.GPUs, c.Alloc.CPUs)
	case cost.Compute < 0 || cost.Storage < 0 || cost.Total < cost.Compute || cost.Total < cost.Storage:
		return fmt.Errorf("contract %s costs %+v at %d", c.ID, cost, now)
	case c.Accepted && !c.Removed && now < c.End && c.State(now, p) == StateDeleted:
		return fmt.Errorf("contract %s reads as deleted at %d, before its end %d", c.ID, now, c.End)
	}
	return nil
}

// span is b-a when b is after a, else 0; exact where b-a overflows int64
// (then the largest int64).
func span(a, b int64) int64 {
	if b <= a {
		return 0
	}
	return int64(min(uint64(b)-uint64(a), math.MaxInt64))
}

// satAdd is a+b for non-negative figures, the largest int64 past it.
func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulDiv is a*b*c/d rounded down, exactly (the product may exceed 64
// bits), for a cost: below 0 it is 0, past the largest int64 that.
func mulDiv(a, b, c, d int64) int64 {
	var x big.Int
	x.Mul(big.NewInt(a), big.NewInt(b))
	x.Mul(&x, big.NewInt(c))
	x.Quo(&x, big.NewInt(d))
	switch {
	case x.Sign() < 0:
		return 0
	case !x.IsInt64():
		return math.MaxInt64
	}
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
