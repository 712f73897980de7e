package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// Checkpoints (docs/design.md §5.6): what this node serves a new node
// (CheckpointOffer, p2p.CheckpointSource), and a new node's start from
// one (JoinAt), persisted so that Open starts there again.

// Store keys of the checkpoint a Replica started at.
const (
	metaCheckpoint  = "ledger.checkpoint"       // ckStart
	stateCheckpoint = "ledger.checkpoint.state" // the State's canonical bytes (a record)
)

// ckStart is what Open needs to start the Log again at its checkpoint.
type ckStart struct {
	Entry []byte   `cbor:"entry"` // the checkpoint's CID
	Depth int      `cbor:"depth"`
	Below [][]byte `cbor:"below"` // CIDs of the ancestors kept
	// State is the record holding the State (compact.go); "" for the
	// record stateCheckpoint. Time is the checkpoint entry's time.
	State string `cbor:"state,omitempty"`
	Time  int64  `cbor:"time,omitempty"`
}

// offerCache keeps the encoded State of the last barrier served.
type offerCache struct {
	top   string
	state []byte
}

// Offer is a checkpoint as a peer serves it (p2p.CheckpointOffer, field
// for field): raw entries and the State's canonical bytes.
type Offer struct {
	Entry       []byte
	Depth       int
	State       []byte
	Below, Tail [][]byte
	// Pruned and PrunedClock: the CIDs and clocks of the entries below the
	// checkpoint that later entries name and the server pruned (their
	// stubs: ledger.Log.LinkPruned), so that those entries link.
	Pruned      [][]byte
	PrunedClock []uint64
}

// CheckpointOffer is the newest barrier of the Log, as p2p serves it
// (p2p.CheckpointSource): its entry and depth, the State its hash names
// (encoded once per barrier), the ancestors later entries name (those
// pruned as CIDs and clocks), and the entries after it.
func (r *Replica) CheckpointOffer() (entry []byte, depth int, state []byte, below, tail, pruned [][]byte, prunedClock []uint64, ok bool) {
	o, ok := r.offer()
	return o.Entry, o.Depth, o.State, o.Below, o.Tail, o.Pruned, o.PrunedClock, ok
}

func (r *Replica) offer() (Offer, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	top := r.lg.Top()
	if top.Entry == nil {
		return Offer{}, false
	}
	st, below, err := r.lg.AtBarrier(top.Entry)
	if err != nil {
		return Offer{}, false
	}
	key := top.Entry.CID().KeyString()
	r.ckMu.Lock()
	if r.ck.top != key {
		b, err := ledger.EncodeState(st)
		if err != nil {
			r.ckMu.Unlock()
			return Offer{}, false
		}
		r.ck = offerCache{top: key, state: b}
	}
	state := r.ck.state
	r.ckMu.Unlock()
	o := Offer{Entry: top.Entry.Bytes(), Depth: top.Depth, State: state}
	for _, e := range below {
		if e.Stub() {
			o.Pruned, o.PrunedClock = append(o.Pruned, e.CID().Bytes()), append(o.PrunedClock, e.Clock)
		} else {
			o.Below = append(o.Below, e.Bytes())
		}
	}
	for _, e := range r.lg.Tail() {
		o.Tail = append(o.Tail, e.Bytes())
	}
	return o, true
}

// ErrNotEmpty says JoinAt was called on a Replica that has a ledger.
var ErrNotEmpty = errors.New("replica: the ledger is not empty")

// JoinAt starts an empty Replica at a checkpoint a peer served for org:
// every entry is decoded and verified, the State checked against the
// checkpoint's hash and count (ledger.NewLogAt), everything stored
// durably, and the entries after the checkpoint folded.
func (r *Replica) JoinAt(org string, o Offer) error {
	cp, err := ledger.Decode(o.Entry)
	if err != nil {
		return fmt.Errorf("replica: checkpoint entry: %w", err)
	}
	if cp.Org != org {
		return fmt.Errorf("replica: checkpoint of another org")
	}
	below, err := decodeAll(o.Below)
	if err != nil {
		return fmt.Errorf("replica: entries below the checkpoint: %w", err)
	}
	tail, err := decodeAll(o.Tail)
	if err != nil {
		return fmt.Errorf("replica: entries after the checkpoint: %w", err)
	}
	st, err := ledger.DecodeState(o.State)
	if err != nil {
		return fmt.Errorf("replica: checkpoint state: %w", err)
	}
	pruned, err := prunedOf(org, o)
	if err != nil {
		return err
	}
	lg, err := ledger.NewLogAt(st, cp, o.Depth, append(below, pruned...))
	if err != nil {
		return fmt.Errorf("replica: checkpoint: %w", err)
	}
	start := ckStart{Entry: cp.CID().Bytes(), Depth: o.Depth}
	blocks := []store.Block{{CID: cp.CID(), Data: cp.Bytes()}}
	for _, e := range below {
		start.Below = append(start.Below, e.CID().Bytes())
		blocks = append(blocks, store.Block{CID: e.CID(), Data: e.Bytes()})
	}
	stubs := make([]store.Pruned, len(pruned))
	for i, e := range pruned {
		start.Below = append(start.Below, e.CID().Bytes())
		stubs[i] = store.Pruned{CID: e.CID(), Clock: e.Clock}
	}
	meta, err := cbor.Marshal(start)
	if err != nil {
		return err
	}
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lg.Len() > 0 {
		return ErrNotEmpty
	}
	// The State, then the entries, then the record that names them: a
	// crash between leaves an empty ledger that joins again.
	if err := r.st.PutRecord(stateCheckpoint, o.State); err != nil {
		return err
	}
	if err := r.st.PutBlocks(blocks); err != nil {
		return err
	}
	if err := r.st.PruneHistory(stubs); err != nil {
		return err
	}
	if err := r.st.SetMeta(metaCheckpoint, meta); err != nil {
		return err
	}
	r.lg = lg
	tb := make([]store.Block, len(tail))
	for i, e := range tail {
		tb[i] = store.Block{CID: e.CID(), Data: e.Bytes()}
	}
	if err := r.st.PutBlocks(tb); err != nil {
		return err
	}
	r.addLocked(tail)
	r.publishLocked()
	return nil
}

// prunedOf are the stubs of the entries o names as pruned below its
// checkpoint (ledger.PrunedStub).
func prunedOf(org string, o Offer) ([]*ledger.Entry, error) {
	if len(o.Pruned) != len(o.PrunedClock) {
		return nil, fmt.Errorf("replica: pruned entries below the checkpoint: %d CIDs, %d clocks", len(o.Pruned), len(o.PrunedClock))
	}
	out := make([]*ledger.Entry, len(o.Pruned))
	for i, b := range o.Pruned {
		c, err := cid.Cast(b)
		if err != nil {
			return nil, fmt.Errorf("replica: pruned entry %d below the checkpoint: cid: %w", i, err)
		}
		if o.PrunedClock[i] == 0 {
			return nil, fmt.Errorf("replica: pruned entry %d below the checkpoint: clock 0", i)
		}
		out[i] = ledger.PrunedStub(org, c, o.PrunedClock[i])
	}
	return out, nil
}

func decodeAll(raw [][]byte) ([]*ledger.Entry, error) {
	es, errs := ledger.DecodeBatch(raw)
	for i, e := range es {
		if e == nil {
			return nil, errs[i]
		}
	}
	return es, nil
}

// openAt is the Log a Replica starts with: a new one, or the one at the
// checkpoint it joined at (JoinAt), whose entries are then left out of
// what Open adds.
func openAt(st *store.Store) (*ledger.Log, error) {
	start, err := readStart(st) // compact.go
	if err != nil {
		return nil, err
	}
	if start == nil {
		return ledger.NewLog(), nil
	}
	var state []byte
	key := start.stateKey()
	err = st.ForEachRecord(key, func(k string, val []byte) error {
		if k == key {
			state = append([]byte(nil), val...)
		}
		return nil
	})
	if err != nil || state == nil {
		return nil, fmt.Errorf("replica: stored checkpoint state missing: %v", err)
	}
	org := ""
	get := func(b []byte) (*ledger.Entry, error) {
		c, err := cid.Cast(b)
		if err != nil {
			return nil, err
		}
		raw, err := st.GetBlock(c)
		if errors.Is(err, store.ErrNotFound) && org != "" {
			if clock, ok := st.PrunedClock(c); ok {
				return ledger.PrunedStub(org, c, clock), nil // pruned: its stub (ledger.Log.LinkPruned)
			}
		}
		if err != nil {
			return nil, err
		}
		return ledger.DecodeWithCID(c, raw)
	}
	cp, err := get(start.Entry)
	if err != nil {
		return nil, fmt.Errorf("replica: stored checkpoint entry: %w", err)
	}
	org = cp.Org
	below := make([]*ledger.Entry, 0, len(start.Below))
	for _, b := range start.Below {
		e, err := get(b)
		if err != nil {
			return nil, fmt.Errorf("replica: stored entry below the checkpoint: %w", err)
		}
		below = append(below, e)
	}
	s, err := ledger.DecodeState(state)
	if err != nil {
		return nil, err
	}
	return ledger.NewLogAt(s, cp, start.Depth, below)
}

// ErrNoCheckpoint says a checkpoint cannot be written now.
var ErrNoCheckpoint = errors.New("replica: no checkpoint now")

// WriteCheckpoint writes a ledger.checkpoint of the State folded from
// every entry this replica has (all of them are its parents' ancestors),
// following the newest barrier. It needs this machine to act for an admin
// (the fold refuses it otherwise), and at most ledger.MaxParents heads.
func (r *Replica) WriteCheckpoint(ctx context.Context) (*ledger.Entry, error) {
	return r.write(ctx, ledger.KindCheckpoint, func(heads []cid.Cid) (any, error) {
		if all, _ := r.lg.Heads(); len(all) != len(heads) {
			return nil, fmt.Errorf("%w: %d heads, more than one entry may name", ErrNoCheckpoint, len(all))
		}
		if r.lg.SinceTop() == 0 {
			return nil, fmt.Errorf("%w: nothing after the newest one", ErrNoCheckpoint)
		}
		st := r.lg.State()
		p := ledger.Checkpoint{Entries: st.Applied + st.Ineffective, Hash: r.lg.StateHash()}
		if t := r.lg.Top(); t.Entry != nil {
			p.Prev = t.Entry.CID().String()
		}
		return p, nil
	})
}

// Compact is CompactTo the newest barrier (compact.go).
func (r *Replica) Compact() error {
	_, top := r.Start()
	if top == 0 {
		return fmt.Errorf("%w: no barrier", ErrNoCheckpoint)
	}
	return r.CompactTo(top)
}

// joinFrom starts an empty ledger at peer p's newest checkpoint, when
// Config.FetchCheckpoint is set and p has one; otherwise, or when anything
// fails (logged), the ledger stays empty and CatchUp fetches everything.
func (r *Replica) joinFrom(ctx context.Context, p peer.ID, org string) {
	if r.cfg.FetchCheckpoint == nil || r.Len() > 0 {
		return
	}
	o, err := r.cfg.FetchCheckpoint(ctx, p, org)
	if err == nil {
		err = r.JoinAt(org, o)
	}
	if err != nil {
		r.log.Debug("ledger: not starting from a checkpoint; fetching the whole ledger", "peer", p, "err", err)
		return
	}
	r.log.Info("ledger: started from a checkpoint", "peer", p, "entries", r.Len())
}

// CheckpointDue reports whether this replica's machine should write a
// checkpoint now by the org's ledger.checkpoint_every (its count of
// entries since the newest barrier, or the time since it).
func (r *Replica) CheckpointDue(now time.Time) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var last int64
	if t := r.lg.Top(); t.Entry != nil {
		last = t.Entry.Time
	}
	return r.lg.State().Settings.Ledger.CheckpointDue(int64(r.lg.SinceTop()), last, now.UnixMilli())
}

// holdLow splits a frame of a sync answer for a Log started at a
// checkpoint: the entries that sort before the checkpoint join held (they
// may be its ancestors, sent again, which the Log recognises only with
// their descendants on the way to it, and an answer comes ancestors
// first), the others are returned to be added now. The caller adds held
// at the answer's end.
func (r *Replica) holdLow(es, held []*ledger.Entry) (now, _ []*ledger.Entry) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	now = es[:0:0]
	for _, e := range es {
		if r.lg.BeforeStart(e) {
			held = append(held, e)
		} else {
			now = append(now, e)
		}
	}
	return now, held
}
