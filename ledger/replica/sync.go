package replica

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// headsMsg is a heads announcement on the org's ledger topic.
type headsMsg struct {
	Heads [][]byte `cbor:"heads"`
	Clock uint64   `cbor:"clock"`
	// Entries optionally carries the entry just written (when small), so
	// peers fold it at gossip speed instead of fetching it afterwards.
	Entries [][]byte `cbor:"entries,omitempty"`
}

// maxPushedEntry is the largest entry pushed inside a heads announcement.
const maxPushedEntry = 16 << 10

// syncMargin is how far below our newest head (in clock, the DAG level) a
// fetch first asks: the answer is every entry above that floor leading to
// what we want, so a deep floor resends much of the ledger we have. Gaps
// deeper than the margin are found by walking back (see fetch).
const syncMargin = 64

// wantRetry is how long a CID asked of one peer is not asked of another.
const wantRetry = 2 * time.Second

// headsGrace is how long heads first seen in a heartbeat wait for their
// announcement before they are fetched from the heartbeat's sender.
const headsGrace = 300 * time.Millisecond

// Announce publishes the heads on the org's ledger topic (Config.Publish).
func (r *Replica) Announce(ctx context.Context) { r.announce(ctx, nil) }

// announce publishes the heads, carrying e itself when it is small.
func (r *Replica) announce(ctx context.Context, e *ledger.Entry) {
	if r.cfg.Publish == nil {
		return
	}
	heads, clock := r.Heads()
	b, err := HeadsPayload(heads, clock, e)
	if err != nil {
		return
	}
	if err := r.cfg.Publish(ctx, b); err != nil && ctx.Err() == nil {
		r.log.Debug("publish heads", "err", err)
	}
}

// OnHeads handles a heads announcement from a peer: it folds the entries
// pushed in it and fetches from the peer the heads this replica lacks.
func (r *Replica) OnHeads(from peer.ID, payload []byte) {
	var msg headsMsg
	if err := cbor.Unmarshal(payload, &msg); err != nil || len(msg.Heads) > 4096 || len(msg.Entries) > 4 {
		r.dropped(DropBadHeads, 1)
		return
	}
	if r.Capped(from) {
		r.dropped(DropCapped, len(msg.Entries)) // cap.go
		return
	}
	h := r.cfg.HeadsHook
	if h != nil {
		h(len(msg.Entries), true)
	}
	if len(msg.Entries) > 0 {
		r.takePushed(from, msg.Entries)
	}
	if h != nil {
		h(len(msg.Entries), false)
	}
	var want []cid.Cid
	r.mu.RLock()
	for _, b := range msg.Heads {
		c, err := cid.Cast(b)
		if err != nil {
			r.mu.RUnlock()
			r.dropped(DropBadHeads, 1)
			return
		}
		if !r.lg.Has(c) {
			want = append(want, c)
		}
	}
	r.mu.RUnlock()
	if len(want) > 0 {
		r.cfg.Spawn(func() { r.SyncFrom(from, want) })
	}
}

// HasHeadsPayload is HasHeads for a heads announcement's payload; an
// undecodable payload counts as known (p2p.LagAware).
func (r *Replica) HasHeadsPayload(payload []byte) bool {
	var msg headsMsg
	if err := cbor.Unmarshal(payload, &msg); err != nil || len(msg.Heads) > 4096 {
		return true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, b := range msg.Heads {
		c, err := cid.Cast(b)
		if err != nil {
			continue
		}
		if !r.lg.Has(c) {
			return false
		}
	}
	return true
}

// WantHeads fetches from machine id the heads its heartbeat names that this
// replica lacks: heartbeats carry heads, so the ledger topic needs only the
// announcements of new entries and a slow periodic one.
//
// A machine names the same heads heartbeat after heartbeat while the ledger
// is quiet, and an org whose machines all wrote at once (after an approval
// wave or a restart) keeps a hundred heads until someone writes again, so
// heads this replica already had when the machine last named them are not
// decoded and looked up again: the ledger only grows.
func (r *Replica) WantHeads(id peer.ID, heads []string) {
	if r.Capped(id) {
		return // cap.go
	}
	key := id.String()
	r.headsMu.Lock()
	same := slices.Equal(r.haveHeads[key], heads)
	r.headsMu.Unlock()
	if same {
		return
	}
	var want []cid.Cid
	r.mu.RLock()
	for _, h := range heads {
		if c, err := cid.Decode(h); err == nil && !r.lg.Has(c) {
			want = append(want, c)
		}
	}
	r.mu.RUnlock()
	if len(want) == 0 {
		r.headsMu.Lock()
		r.haveHeads[key] = heads
		r.headsMu.Unlock()
		return
	}
	// The author's own announcement, carrying a new entry, is usually on
	// its way by gossip: fetch only what is still missing a moment later.
	r.cfg.Spawn(func() {
		t := time.NewTimer(headsGrace)
		defer t.Stop()
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		r.mu.RLock()
		missing := want[:0]
		for _, c := range want {
			if !r.lg.Has(c) {
				missing = append(missing, c)
			}
		}
		r.mu.RUnlock()
		if len(missing) > 0 {
			r.SyncFrom(id, missing)
		}
	})
}

// SyncFrom fetches want and its missing ancestors from peer p, returning
// when done. At most one sync per peer runs at a time: wants for a peer
// whose sync is running are queued for its next round.
//
// A new entry is named at once by every machine's next heartbeat, so without
// care a replica would fetch it from each of them in parallel: a CID asked of
// one peer is not asked of another for wantRetry, unless that sync ends
// without it.
func (r *Replica) SyncFrom(p peer.ID, want []cid.Cid) {
	if r.Capped(p) {
		return // cap.go
	}
	now := r.cfg.Now()
	r.mu.Lock()
	fresh := want[:0:0]
	for _, c := range want {
		k := c.KeyString()
		if at, ok := r.wanted[k]; ok && now.Sub(at) < wantRetry {
			continue
		}
		r.wanted[k] = now
		fresh = append(fresh, c)
	}
	if len(r.wanted) > 4096 {
		for k, at := range r.wanted {
			if now.Sub(at) >= wantRetry {
				delete(r.wanted, k)
			}
		}
	}
	want = fresh
	if len(want) == 0 {
		r.mu.Unlock()
		return
	}
	if r.syncing[p] {
		r.syncMore[p] = append(r.syncMore[p], want...)
		r.mu.Unlock()
		return
	}
	r.syncing[p] = true
	org := r.lg.Org()
	r.mu.Unlock()
	for {
		ctx, cancel := context.WithTimeout(r.ctx, 2*time.Minute)
		err := r.fetch(ctx, p, org, want)
		cancel()
		if err != nil && r.ctx.Err() == nil {
			r.log.Debug("sync", "peer", p.String(), "err", err)
		}
		r.mu.Lock()
		for _, c := range want {
			delete(r.wanted, c.KeyString()) // got it, or another peer may be asked now
		}
		want = nil
		for _, c := range r.syncMore[p] {
			if !r.lg.Has(c) {
				want = append(want, c)
			}
		}
		delete(r.syncMore, p)
		if len(want) == 0 || r.ctx.Err() != nil {
			delete(r.syncing, p)
			r.mu.Unlock()
			return
		}
		org = r.lg.Org()
		r.mu.Unlock()
	}
}

// CatchUp fetches peer p's whole ledger of org (what this replica lacks of
// it): how a joining machine, which has no org yet, gets the ledger.
func (r *Replica) CatchUp(ctx context.Context, p peer.ID, org string) error {
	r.joinFrom(ctx, p, org) // checkpoint.go: an empty ledger starts at the peer's checkpoint
	return r.fetch(ctx, p, org, nil)
}

// fetch pulls want (the peer's heads when empty) and their missing ancestors
// from p, verifying every block against its CID and signature, in parallel on
// every core, and storing them durably before they are folded.
func (r *Replica) fetch(ctx context.Context, p peer.ID, org string, want []cid.Cid) error {
	if r.cfg.Fetch == nil {
		return errors.New("replica: no Fetch configured")
	}
	r.mu.RLock()
	_, floor := r.lg.Heads()
	r.mu.RUnlock()
	if floor > 0 {
		// Entries we lack can sit below our newest head on concurrent branches;
		// ask a margin below it, and walk further back below if parents are
		// still missing.
		floor -= min(floor, syncMargin)
	}
	// Asks whose answers were dropped as orphans, asked again once what
	// lies below them is folded; those whose answers may still wait; how
	// deep below the lowest orphans the next round asks (see walkback.go).
	var back, held [][]cid.Cid
	step := uint64(256)
	total := 0 // blocks received in all rounds
	for round := 0; round < 64; round++ {
		r.mu.RLock()
		drops0 := r.lostDrops
		r.mu.RUnlock()
		// A pipeline: frames are verified (in parallel, on every core) as
		// they arrive, while the previous ones are stored and folded.
		fctx, fcancel := context.WithCancel(ctx)
		batches := make(chan []*ledger.Entry, 2)
		stored := make(chan error, 1)
		go func() {
			var err error
			var low []*ledger.Entry // held to the answer's end (holdLow)
			for es := range batches {
				if err != nil {
					continue // drain
				}
				if es, low = r.holdLow(es, low); len(es) > 0 {
					var capped bool
					if capped, err = r.addFrom(p, es); capped && err == nil {
						err = fmt.Errorf("peer %s is capped", p) // cap.go
					}
					if err != nil {
						fcancel()
					}
				}
			}
			if err == nil && len(low) > 0 {
				_, err = r.addFrom(p, low)
			}
			stored <- err
		}()
		received := 0
		err := r.cfg.Fetch(fctx, p, org, want, floor, func(raw [][]byte) error {
			if received += len(raw); received > r.cfg.maxFetchBlocks {
				return fmt.Errorf("peer %s sent more than %d blocks in one answer", p, r.cfg.maxFetchBlocks)
			}
			// Walking back and up again reads a long ledger two or three
			// times over; a peer whose answers never meet what we have
			// gets no more (the next sync goes on from what was folded).
			if total += len(raw); total > maxSyncAnswers*r.cfg.maxFetchBlocks {
				return fmt.Errorf("peer %s sent more than %d blocks in one sync", p, maxSyncAnswers*r.cfg.maxFetchBlocks)
			}
			// The answer holds every entry above the floor that leads to
			// want, mostly ones we have: a hash is cheaper than a signature.
			r.mu.RLock()
			fresh := raw[:0:0]
			for _, b := range raw {
				if !r.lg.Has(ledger.CIDOf(b)) {
					fresh = append(fresh, b)
				}
			}
			r.mu.RUnlock()
			es, bad := verifyParallel(fresh)
			r.dropped(DropBadBlock, bad)
			for _, e := range es {
				if e.Org != org && !(e.Kind == ledger.KindGenesis && e.CID().String() == org) {
					return fmt.Errorf("peer %s sent an entry of another org", p)
				}
			}
			select {
			case batches <- es:
				return nil
			case <-fctx.Done():
				return fctx.Err()
			}
		})
		close(batches)
		serr := <-stored
		fcancel()
		if serr != nil {
			return serr
		}
		if err != nil {
			return err
		}
		// Still missing parents?
		r.mu.Lock()
		w := r.walkLocked(drops0)
		_, head := r.lg.Heads()
		if len(w.missing) == 0 && len(back) == 0 {
			r.lastPeer, r.lastSync = p, r.cfg.Now()
		}
		r.mu.Unlock()
		held = append(held, want)
		if w.dropped {
			back, held = append(back, held...), nil
		}
		if len(w.missing) == 0 {
			held = nil
			if len(back) == 0 {
				return nil
			}
			want, back = back[len(back)-1], back[:len(back)-1]
			floor = head - min(head, syncMargin)
			continue
		}
		want = w.missing
		floor = w.minClock - min(w.minClock, step)
		step = min(2*step, uint64(r.cfg.maxFetchBlocks))
	}
	return errors.New("sync did not converge")
}

// verifyParallel decodes and verifies blocks on every core, each core's
// share with batched signature checks (ledger.DecodeBatch). It returns the
// good entries in input order and how many were bad.
func verifyParallel(raw [][]byte) ([]*ledger.Entry, int) {
	out := make([]*ledger.Entry, len(raw))
	workers := runtime.GOMAXPROCS(0)
	if len(raw) < 64 {
		workers = 1
	}
	var wg sync.WaitGroup
	chunk := (len(raw) + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, len(raw))
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			es, _ := ledger.DecodeBatch(raw[lo:hi])
			copy(out[lo:hi], es)
		}()
	}
	wg.Wait()
	good := out[:0]
	bad := 0
	for _, e := range out {
		if e == nil {
			bad++
			continue
		}
		good = append(good, e)
	}
	return good, bad
}

// Announced fetches, from a peer that pushed its heads, those this replica
// lacks: p2p.SyncSource.
func (r *Replica) Announced(from peer.ID, heads []cid.Cid) {
	if r.Capped(from) {
		return // p2p.ServeSync refuses it first (cap.go)
	}
	var want []cid.Cid
	r.mu.RLock()
	for _, h := range heads {
		if !r.lg.Has(h) {
			want = append(want, h)
		}
	}
	r.mu.RUnlock()
	if len(want) > 0 {
		r.cfg.Spawn(func() { r.SyncFrom(from, want) })
	}
}

// takePushed verifies entries pushed in a heads announcement exactly as
// fetched blocks are (signature, canonical form, org), folds them and stores
// them durably. Entries whose parents are missing wait for the fetch that the
// announcement's heads trigger.
//
// The fold comes first, so the node reacts to a new job while the write is
// under way: on a busy host the write is the slowest step of taking a new
// entry. A pushed entry is not a write this machine acknowledged, and one
// lost in a crash is fetched again from the peers that sent it; but a local
// write must never name a parent that is not durable, or the machine would
// restart with a child whose parent it lacks, so Write waits (persisting)
// until every folded entry is stored.
func (r *Replica) takePushed(from peer.ID, raw [][]byte) {
	org := r.Org()
	var es []*ledger.Entry
	decoded, _ := ledger.DecodeBatch(raw)
	for _, e := range decoded {
		if e == nil || e.Org != org {
			r.dropped(DropBadBlock, 1)
			continue
		}
		if r.Has(e.CID()) {
			continue
		}
		es = append(es, e)
	}
	if len(es) == 0 {
		return
	}
	if err := r.addDurable(from, es); err != nil {
		r.log.Warn("could not store a pushed ledger entry; peers will send it again after a restart", "err", err)
	}
}

// addDurable folds es, sent by peer src (see add), and stores the entries
// that entered the log (es's, and waiting ones whose parents es brought),
// before any local write may name them (persisting). Entries still waiting for parents are not
// stored: orphans a peer sends take no disk, and are gone after a restart
// (they come back with their parents).
func (r *Replica) addDurable(src peer.ID, es []*ledger.Entry) error {
	r.persisting.RLock()
	defer r.persisting.RUnlock()
	added := r.add(src, es)
	if len(added) == 0 {
		return nil
	}
	blocks := make([]store.Block, len(added))
	for i, e := range added {
		blocks[i] = store.Block{CID: e.CID(), Data: e.Bytes()}
	}
	return r.st.PutBlocks(blocks)
}
