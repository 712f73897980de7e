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
// Batch.entries), its place among the entry's results, and whether it
// ended the item failed. The rest of its event (job, item, code, duration,
// error) is read from the entry's payload again when the event is built:
// a hit holds no pointer, so the hits of a 100,000-entry catch-up are
// small and the collector does not scan them.
type itemHit struct {
	entry  uint32
	result uint32
	failed bool
}

// Len is the number of events in b.
func (b *Batch) Len() int {
	if b == nil {
		return 0
	}
	return len(b.entries) + len(b.mid) + len(b.items) + len(b.tail)
}

// described is an entry's or an item's event, not built: what the bus's
// ring keeps of one that nobody took when it was published (the entry, not
// the batch: the ring holds on to no more than its own events' entries).
type described struct {
	entry *ledger.Entry
	item  bool    // an item's event (of hit), else the entry's ledger.entry
	hit   itemHit // the item
}

// typ is the event's type.
func (d *described) typ() string {
	switch {
	case !d.item:
		return LedgerEntry
	case d.hit.failed:
		return ItemFailed
	}
	return ItemDone
}

// build makes the event; mine is whether this node sends it.
func (d *described) build(mine bool) Event {
	e, a := d.entry, d.entry.AuthorString()
	if !d.item {
		return Event{Type: LedgerEntry, Machine: a, Time: time.UnixMilli(e.Time),
			Data: map[string]any{"kind": e.Kind, "cid": e.CID().String(), "author": a}, Mine: mine}
	}
	ev := Event{Type: d.typ(), Machine: a, Time: time.UnixMilli(e.Time), Mine: mine}
	var p resultsView
	if p.decode(e.Payload) != nil || int(d.hit.result) >= len(p.Results) {
		return ev // cannot be: itemHits read the hit from this payload
	}
	r := &p.Results[d.hit.result]
	item := r.Item
	ev.Job, ev.Item = string(p.Job), &item
	ev.Data = map[string]any{"code": r.Code, "duration_ms": r.DurationMS}
	if d.hit.failed && len(r.Error) > 0 {
		ev.Data["error"] = string(r.Error)
	}
	return ev
}

// describe is the i-th event of b when it is an entry's or an item's
// (ok), and whether this node sends it.
func (b *Batch) describe(i int) (d described, mine, ok bool) {
	switch {
	case i < len(b.entries):
		d = described{entry: b.entries[i]}
	case i >= len(b.entries)+len(b.mid) && i < len(b.entries)+len(b.mid)+len(b.items):
		h := b.items[i-len(b.entries)-len(b.mid)]
		d = described{entry: b.entries[h.entry], item: true, hit: h}
	default:
		return d, false, false
	}
	return d, d.entry.AuthorString() == b.self, true
}

// At builds the i-th event of b.
func (b *Batch) At(i int) Event {
	if d, mine, ok := b.describe(i); ok {
		return d.build(mine)
	}
	i -= len(b.entries)
	if i < len(b.mid) {
		return b.mid[i]
	}
	return b.tail[i-len(b.mid)-len(b.items)]
}

// Events builds every event of b (tests, and callers that want them all).
func (b *Batch) Events() []Event {
	out := make([]Event, 0, b.Len())
	for i := range b.Len() {
		out = append(out, b.At(i))
	}
	return out
}
