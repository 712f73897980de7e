package marketsvc

import (
	"context"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/runtime"
)

// Billing by the second (market/billing.go, docs/design.md §14): the times
// billing counts are written by the host and by third machines.
//
//   - The host acknowledges (contract.ack) the moves of its contracts once
//     its instances follow them: a start once the instance runs, a stop
//     once it no longer does, a removal once it is gone. It does not run a
//     start dated more than market.AckSlack ahead of its own clock.
//   - Every other machine witnesses (contract.witness) the moves of
//     contracts that are neither its person's rentals nor its person's
//     hosting, as they reach it: the online one with the lowest ID at
//     once, any other eligible one witnessFallback later if none has.
//     Moves already there when the node started are not witnessed (its
//     time for them would be when it came back, not when they were made),
//     unless made within witnessFallback of its first pass.

// witnessFallback is how long after first seeing a move an eligible
// machine that is not the first choice witnesses it: well within
// market.AckSlack, so a late witness still bounds nothing wrongly.
const witnessFallback = 5 * time.Second

// billingBook is what the market's loop remembers of moves between
// passes.
type billingBook struct {
	// acked: moves this process wrote an acknowledgement of (kept
	// without effect, it is not written again every second).
	acked map[string]bool
	// seen: when this process first saw each move no machine had
	// witnessed; nil before the first pass.
	seen map[string]time.Time
}

// ackMoves writes the host's acknowledgement of the moves of cs (this
// machine's contracts) that its instances, as runs lists them, now
// follow. Called with the host's lock held.
func (s *Service) ackMoves(ctx context.Context, cs []ledger.Contract, runs []runtime.ContractRun) {
	h := s.host
	for i := range cs {
		c := &cs[i]
		pending := c.Pending()
		if !c.Accepted || len(pending) == 0 {
			continue
		}
		var reqs []string
		for _, m := range pending {
			if !h.billing.acked[m.Request] {
				reqs = append(reqs, m.Request)
			}
		}
		if len(reqs) == 0 || !followed(c.Marks[len(c.Marks)-1], c.ID, runs) {
			continue
		}
		if len(reqs) > ledger.MaxMarksNamed {
			reqs = reqs[:ledger.MaxMarksNamed]
		}
		e, err := s.d.Ledger.Write(ctx, ledger.KindContractAck, ledger.ContractMarks{Contract: c.ID, Requests: reqs})
		if e != nil {
			for _, r := range reqs {
				h.billing.acked[r] = true
			}
		}
		if err != nil && ctx.Err() == nil {
			s.d.Log.Info("contract acknowledgement not written or without effect", "contract", c.ID, "err", err)
		}
	}
}

// followed reports whether the instances in runs follow the move m of
// contract id: it runs after a start, does not after a stop, and is gone
// after a removal.
func followed(m market.Mark, id string, runs []runtime.ContractRun) bool {
	exists, running := false, false
	for _, r := range runs {
		if r.Contract == id {
			exists, running = true, running || r.Running
		}
	}
	switch {
	case m.Removal:
		return !exists
	case m.Kind == market.MarkStart:
		return running
	}
	return !running
}

// startTooEarly reports whether c's last move is a start dated more than
// market.AckSlack ahead of now: the host runs it only once its own clock
// is there, so a renter cannot have its start billed from later than it
// ran.
func startTooEarly(c *ledger.Contract, now int64) bool {
	n := len(c.Marks)
	return n > 1 && c.Marks[n-1].Kind == market.MarkStart && !c.Marks[n-1].Acked && c.Marks[n-1].At > now+market.AckSlack
}

// witnessMoves writes this machine's witness of the moves of others'
// contracts that reached it since the last pass, when it is the one to
// (see above).
func (s *Service) witnessMoves(ctx context.Context) {
	now := s.d.Now()
	type todo struct {
		contract string
		reqs     []string
	}
	var out []todo
	s.host.mu.Lock()
	b := &s.host.billing
	first := b.seen == nil
	seen := map[string]time.Time{}
	s.d.Ledger.View(func(st *ledger.State) {
		me := st.Machines[s.d.Machine]
		if me == nil || me.Status != ledger.MachineApproved {
			return
		}
		for _, c := range st.SortedContracts() {
			if c.Renter == me.Owner || c.Host == me.Owner || !c.Accepted && c.Rejected {
				continue
			}
			var reqs []string
			for _, m := range c.Unwitnessed() {
				at, ok := b.seen[m.Request]
				if first {
					// There before this process's first pass: never
					// witnessed here, unless made within witnessFallback
					// of now by the requester's clock (the node just
					// started, or its first pass came late): its time
					// for it then is off by no more than a late witness.
					at = time.Time{}
					if now.UnixMilli()-m.At <= witnessFallback.Milliseconds() {
						at = now
					}
				} else if !ok {
					at = now
				}
				seen[m.Request] = at
				if at.IsZero() || m.Request == "" {
					continue
				}
				if s.firstWitness(st, c, now) || now.Sub(at) >= witnessFallback {
					reqs = append(reqs, m.Request)
				}
			}
			if len(reqs) > ledger.MaxMarksNamed {
				reqs = reqs[:ledger.MaxMarksNamed]
			}
			if len(reqs) > 0 {
				out = append(out, todo{c.ID, reqs})
			}
		}
	})
	b.seen = seen
	s.host.mu.Unlock()
	for _, t := range out {
		e, err := s.d.Ledger.Write(ctx, ledger.KindContractWitness, ledger.ContractMarks{Contract: t.contract, Requests: t.reqs})
		if e != nil {
			s.host.mu.Lock()
			for _, r := range t.reqs {
				b.seen[r] = time.Time{} // written: not again
			}
			s.host.mu.Unlock()
		}
		if err != nil && ctx.Err() == nil {
			s.d.Log.Debug("contract witness not written or without effect", "contract", t.contract, "err", err)
		}
	}
}

// firstWitness reports whether this machine is the online machine with the
// lowest ID among those that may witness c: approved, of a person who
// neither rents nor hosts it.
func (s *Service) firstWitness(st *ledger.State, c *ledger.Contract, now time.Time) bool {
	for _, m := range st.SortedMachines() {
		if m.Status != ledger.MachineApproved || m.Owner == c.Renter || m.Owner == c.Host {
			continue
		}
		if m.ID == s.d.Machine {
			return true
		}
		if s.book().online(m.ID, s.d.Interval, now) {
			return false
		}
	}
	return false
}

// online reports whether machine's last heartbeat came within three
// intervals of now.
func (b *offerBook) online(machine string, interval time.Duration, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts := b.beats[machine]
	return len(ts) > 0 && now.Sub(ts[len(ts)-1]) <= 3*interval
}
