package market

import (
	"errors"
	"fmt"
)

// Billing by the second (issue 30, docs/design.md §14): a contract's
// compute accrues only while it runs and its storage while it exists,
// from times that neither the renter nor the host can move in their own
// favour by more than AckSlack.
//
// Every move that starts or ends a running span or the contract's life is
// a Mark, in ledger order: the request (its acceptance starts the
// contract), and each of the renter's starts, stops and its removal, or
// the host's removal. A mark carries three times:
//
//   - At, the requesting entry's time (its author's clock);
//   - Ack, the host machine's acknowledgement that it carried the move out
//     (the accept for the request; a contract.ack for the others; a host's
//     own removal is its own acknowledgement), on the host's clock;
//   - Witness, the first contract.witness of the request by a third
//     machine (an approved machine of neither the renter nor the host) at
//     the moment the request reached it, on that machine's clock.
//
// The reference time of a mark is its Witness when it has one, else At.
// A start is billed from max(Ack, reference - AckSlack), and not before
// it is acknowledged: the host, who gains by an early start, can move it
// earlier by at most AckSlack. A stop is billed at min(Ack, reference +
// AckSlack), and until it is acknowledged at reference + AckSlack: the
// host, who gains by a late stop, can move it later by at most AckSlack,
// acknowledging late or never. The renter gains by a late start and an
// early stop; with a witness it moves neither (the witness's time is when
// the request reached the mesh, whatever the request's own time says);
// without one (an org of only the renter's and the host's machines) the
// reference is the renter's own time, and the host's node refuses to act
// on a start dated more than AckSlack ahead of its clock, but a back-dated
// stop is billed from its date (plus AckSlack): two parties have no third
// clock to check each other by.

// AckSlack is how far the host's acknowledgement may be from a move's
// reference time and still count: one heartbeat interval (the default, 30
// s; the ledger does not know a machine's own interval).
const AckSlack = 30 * 1000

// Mark kinds.
const (
	MarkStart = "start" // the request (accepted) or a start
	MarkStop  = "stop"  // a stop, or a removal (Removal)
)

// ErrMark is the class of an acknowledgement or witness that names no
// mark of the contract that could take it.
var ErrMark = errors.New("market: no such move to acknowledge or witness")

// Mark is one billed move of a contract (see above). Request names it: the
// requesting entry's ID, as the ledger gives it (NameMark).
type Mark struct {
	Kind      string `cbor:"k" json:"kind"`
	Request   string `cbor:"r" json:"request"`
	At        int64  `cbor:"t" json:"at"`
	Removal   bool   `cbor:"x,omitempty" json:"removal,omitempty"`
	Acked     bool   `cbor:"ak,omitempty" json:"acked,omitempty"`
	Ack       int64  `cbor:"a,omitempty" json:"ack,omitempty"`
	Witnessed bool   `cbor:"wd,omitempty" json:"witnessed,omitempty"`
	Witness   int64  `cbor:"w,omitempty" json:"witness,omitempty"`
}

// ref is the mark's reference time: its witness's, else its request's.
func (m Mark) ref() int64 {
	if m.Witnessed {
		return m.Witness
	}
	return m.At
}

// Billed is the time the mark is billed at, and whether it counts yet: a
// start counts once acknowledged; a stop always (at its latest until
// acknowledged).
func (m Mark) Billed() (int64, bool) {
	r := m.ref()
	if m.Kind == MarkStart {
		if !m.Acked {
			return 0, false
		}
		return max(m.Ack, r-AckSlack), true
	}
	if !m.Acked {
		return r + AckSlack, true
	}
	return min(m.Ack, r+AckSlack), true
}

// mark appends a move requested at now, unnamed (NameMark names it).
func (c Contract) mark(kind string, now int64, removal bool) Contract {
	c.Marks = append(c.Marks[:len(c.Marks):len(c.Marks)], Mark{Kind: kind, At: now, Removal: removal})
	return c
}

// NameMark names the contract's last mark, if unnamed, after the entry
// that requested it.
func (c Contract) NameMark(request string) Contract {
	if n := len(c.Marks); n > 0 && c.Marks[n-1].Request == "" {
		c.Marks = append([]Mark(nil), c.Marks...)
		c.Marks[n-1].Request = request
	}
	return c
}

// Ack is the host's acknowledgement at now of the moves requests name: the
// ones not yet acknowledged take now. It errs (ErrMark) when a request
// names no mark of c, or every one was acknowledged already.
func Ack(c Contract, requests []string, now int64) (Contract, error) {
	return c.stamp(requests, now, "acknowledge", func(m *Mark) bool {
		if m.Acked {
			return false
		}
		m.Acked, m.Ack = true, now
		return true
	})
}

// Witness is a third machine's witness at now of the moves requests name:
// the first witness of each counts.
func Witness(c Contract, requests []string, now int64) (Contract, error) {
	return c.stamp(requests, now, "witness", func(m *Mark) bool {
		if m.Witnessed {
			return false
		}
		m.Witnessed, m.Witness = true, now
		return true
	})
}

// stamp sets a time on the marks requests name, with set; see Ack.
func (c Contract) stamp(requests []string, now int64, verb string, set func(m *Mark) bool) (Contract, error) {
	if err := checkTime(now); err != nil {
		return c, err
	}
	if len(requests) == 0 || len(requests) > len(c.Marks) {
		return c, fmt.Errorf("%w: %d requests named; contract %s has %d moves", ErrMark, len(requests), c.ID, len(c.Marks))
	}
	marks := append([]Mark(nil), c.Marks...)
	changed := false
	for _, r := range requests {
		i := -1
		for k := range marks {
			if r != "" && marks[k].Request == r {
				i = k
			}
		}
		if i < 0 {
			return c, fmt.Errorf("%w: contract %s has no move %q to %s", ErrMark, c.ID, oneLine(r), verb)
		}
		if set(&marks[i]) {
			changed = true
		}
	}
	if !changed {
		return c, fmt.Errorf("%w: every move named was %sd already", ErrMark, verb)
	}
	c.Marks = marks
	return c, nil
}

// Pending are the moves not yet acknowledged by the host, oldest first.
func (c Contract) Pending() []Mark {
	var out []Mark
	for _, m := range c.Marks {
		if !m.Acked {
			out = append(out, m)
		}
	}
	return out
}

// Unwitnessed are the moves no third machine has witnessed yet.
func (c Contract) Unwitnessed() []Mark {
	var out []Mark
	for _, m := range c.Marks {
		if !m.Witnessed {
			out = append(out, m)
		}
	}
	return out
}

// Billing is what a contract's marks bill up to now: the ms it ran
// (compute) and the ms it existed (storage), within its term (to its
// end), and nothing after its removal.
func (c Contract) Billing(now int64) (runMS, existMS int64) {
	if !c.Accepted {
		return 0, 0
	}
	limit := min(now, c.End)
	// Nothing runs after the removal, though a stop's billed time (each
	// within its slack of its request) may come later than the removal's.
	life := limit
	for _, m := range c.Marks {
		if t, ok := m.Billed(); ok && m.Kind == MarkStop && m.Removal {
			life = min(life, t)
		}
	}
	limit = life
	first, have := int64(0), false
	running := false
	var from, lastStop int64
	for _, m := range c.Marks {
		t, ok := m.Billed()
		if !ok {
			continue
		}
		switch m.Kind {
		case MarkStart:
			if !have {
				first, have = t, true
			}
			if !running {
				running, from = true, max(t, lastStop)
			}
		case MarkStop:
			if running {
				// A stop billed before its start (each mark moves within its
				// slack) ends the span where it began, and the next start
				// runs from no earlier than that: spans never overlap nor
				// begin before the first start.
				t = max(t, from)
				runMS = satAdd(runMS, span(from, min(t, limit)))
				running = false
			}
			lastStop = max(lastStop, t)
		}
	}
	if running {
		runMS = satAdd(runMS, span(from, limit))
	}
	if have {
		existMS = span(first, life)
	}
	return runMS, existMS
}
