package events

import (
	"time"

	"github.com/cshare/cshare/ledger"
)

// Batch is the events of one ledger change, in order: a ledger.entry for
// each entry, then machine.*, member.* and settings.changed, then the
// item.done and item.failed of the results, then job.* and contract.*.
// The entries' and the items' events (one or more for every entry) are
// described, not built: Bus.PublishBatch builds only those a subscriber,
// a hook or the bus's ring takes, so a node catching up on thousands of
// entries with nobody watching builds a ring's worth.
type Batch struct {
	self    string
	entries []*ledger.Entry // a ledger.entry each
	mid     []Event         // machine.*, member.*, settings.changed
	items   []itemHit       // item.done and item.failed
	tail    []Event         // job.*, contract.*
}

// itemHit is an item a result ended: the result's entry (an index into
// Batch.entries) and what the event says of it.
type itemHit struct {
	entry      int
	job        string
	failed     bool
	item       int64
	code       int64
	durationMS int64
	err        string
}

// Len is the number of events in b.
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	return len(b.entries) + len(b.mid) + len(b.items) + len(b.tail)
}

// lazy says the i-th event is an entry's or an item's: one the bus may
// keep unbuilt.
func (b *Batch) lazy(i int) bool {
	return i < len(b.entries) || (i >= len(b.entries)+len(b.mid) && i < len(b.entries)+len(b.mid)+len(b.items))
}

// meta is the i-th event's type and whether this node sends it, without
// building it.
func (b *Batch) meta(i int) (typ string, mine bool) {
	if i < len(b.entries) {
		return LedgerEntry, b.entries[i].AuthorString() == b.self
	}
	i -= len(b.entries)
	if i < len(b.mid) {
		return b.mid[i].Type, b.mid[i].Mine
	}
	i -= len(b.mid)
	if i < len(b.items) {
		h := b.items[i]
		typ = ItemDone
		if h.failed {
			typ = ItemFailed
		}
		return typ, b.entries[h.entry].AuthorString() == b.self
	}
	i -= len(b.items)
	return b.tail[i].Type, b.tail[i].Mine
}

// At builds the i-th event of b.
func (b *Batch) At(i int) Event {
	if i < len(b.entries) {
		e := b.entries[i]
		a := e.AuthorString()
		return Event{Type: LedgerEntry, Machine: a, Time: time.UnixMilli(e.Time),
			Data: map[string]any{"kind": e.Kind, "cid": e.CID().String(), "author": a}, Mine: a == b.self}
	}
	i -= len(b.entries)
	if i < len(b.mid) {
		return b.mid[i]
	}
	i -= len(b.mid)
	if i < len(b.items) {
		h := b.items[i]
		e := b.entries[h.entry]
		a := e.AuthorString()
		item := h.item
		ev := Event{Type: ItemDone, Machine: a, Job: h.job, Item: &item, Time: time.UnixMilli(e.Time), Mine: a == b.self,
			Data: map[string]any{"code": h.code, "duration_ms": h.durationMS}}
		if h.failed {
			ev.Type = ItemFailed
			if h.err != "" {
				ev.Data["error"] = h.err
			}
		}
		return ev
	}
	i -= len(b.items)
	return b.tail[i]
}

// Events builds every event of b (tests, and callers that want them all).
func (b *Batch) Events() []Event {
	out := make([]Event, 0, b.Len())
	for i := range b.Len() {
		out = append(out, b.At(i))
	}
	return out
}
