package node

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/p2p"
)

// addLocked adds entries whose parents are known (now or once they arrive),
// keeping the others waiting. n.mu must be held. It returns the entries that
// entered the log.
func (n *Node) addLocked(es []*ledger.Entry) []*ledger.Entry {
	for _, e := range es {
		if !n.lg.Has(e.CID()) {
			n.waiting[e.CID().KeyString()] = e
		}
	}
	var added []*ledger.Entry
	// The total order is topological, so one pass in order finds every entry
	// whose ancestors are all present.
	pend := make([]*ledger.Entry, 0, len(n.waiting))
	for _, e := range n.waiting {
		pend = append(pend, e)
	}
	sort.Slice(pend, func(i, j int) bool { return pend[i].Key().Less(pend[j].Key()) })
	ready := map[string]bool{}
	var batch []*ledger.Entry
	for _, e := range pend {
		ok := true
		for _, p := range e.Parents {
			if !ready[p.KeyString()] && !n.lg.Has(p) {
				ok = false
				break
			}
		}
		if ok && (e.Kind == ledger.KindGenesis || n.lg.Len() > 0 || len(batch) > 0) {
			ready[e.CID().KeyString()] = true
			batch = append(batch, e)
		}
	}
	if len(batch) > 0 {
		for _, e := range batch {
			delete(n.waiting, e.CID().KeyString())
		}
		errs, err := n.lg.AddBatch(batch)
		if err != nil {
			n.log.Debug("ledger: some entries were not added", "err", err)
		}
		for i, e := range batch {
			switch {
			case !n.lg.Has(e.CID()):
				n.metrics.dropped.WithLabelValues("invalid").Inc()
			default:
				added = append(added, e)
				if errs != nil && errs[i] != nil {
					n.metrics.dropped.WithLabelValues("no_effect").Inc()
				}
			}
		}
	}
	if len(n.waiting) > 100000 {
		n.waiting = map[string]*ledger.Entry{} // a peer is flooding us with orphans
	}
	if len(added) > 0 {
		n.noteAdded()
		n.metrics.entries.Set(float64(n.lg.Len()))
		n.kickScheduler()
	}
	return added
}

// write signs a new entry with this node's key, stores it durably, folds it,
// and announces the new heads. The error is the fold's verdict when the entry
// had no effect (it stays in the DAG, as every entry does).
func (n *Node) write(ctx context.Context, kind string, payload any) (*ledger.Entry, error) {
	n.writeMu.Lock()
	defer n.writeMu.Unlock()
	// Every entry folded so far is durable before this one names it: a
	// pushed entry is folded before its write ends (see takePushed).
	n.persisting.Lock()
	n.mu.RLock()
	org := n.lg.Org()
	heads, clock := n.parentsLocked()
	n.mu.RUnlock()
	n.persisting.Unlock()
	if kind == ledger.KindGenesis {
		org, heads, clock = "", nil, 0
	}
	e, err := n.signer.Sign(org, kind, payload, heads, clock, time.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	if err := n.store.PutBlocks([]store.Block{{CID: e.CID(), Data: e.Bytes()}}); err != nil {
		return nil, err
	}
	n.mu.Lock()
	errs, err := n.lg.AddBatch([]*ledger.Entry{e})
	n.noteAdded()
	n.metrics.entries.Set(float64(n.lg.Len()))
	n.mu.Unlock()
	if err != nil {
		return nil, err
	}
	n.kickScheduler()
	n.announceWith(ctx, e)
	return e, errs[0]
}

// parentsLocked picks the parents of a new entry: the heads, at most
// ledger.MaxParents of them (the newest first; the rest stay heads and are
// named by a later entry), and the largest clock among them. n.mu must be
// held.
func (n *Node) parentsLocked() ([]cid.Cid, uint64) {
	heads, clock := n.lg.Heads()
	if len(heads) <= ledger.MaxParents {
		return heads, clock
	}
	sort.Slice(heads, func(i, j int) bool {
		a, b := n.lg.Get(heads[i]), n.lg.Get(heads[j])
		if a.Clock != b.Clock {
			return a.Clock > b.Clock
		}
		return heads[i].KeyString() < heads[j].KeyString()
	})
	heads = heads[:ledger.MaxParents]
	clock = 0
	for _, h := range heads {
		clock = max(clock, n.lg.Get(h).Clock)
	}
	return heads, clock
}

type headsMsg struct {
	Heads [][]byte `cbor:"heads"`
	Clock uint64   `cbor:"clock"`
	// Entries optionally carries the entry just written (when small), so
	// peers fold it at gossip speed instead of fetching it afterwards.
	Entries [][]byte `cbor:"entries,omitempty"`
}

// maxPushedEntry is the largest entry pushed inside a heads announcement.
const maxPushedEntry = 16 << 10

// announce publishes our heads on the org's ledger topic.
func (n *Node) announce(ctx context.Context) { n.announceWith(ctx, nil) }

// announceWith publishes our heads, carrying e itself when it is small.
func (n *Node) announceWith(ctx context.Context, e *ledger.Entry) {
	n.mu.RLock()
	o := n.org
	heads, clock := n.lg.Heads()
	n.mu.RUnlock()
	if o == nil {
		return
	}
	msg := headsMsg{Clock: clock}
	for _, h := range heads {
		msg.Heads = append(msg.Heads, h.Bytes())
	}
	if e != nil && len(e.Bytes()) <= maxPushedEntry {
		msg.Entries = [][]byte{e.Bytes()}
	}
	b, err := cbor.Marshal(msg)
	if err != nil {
		return
	}
	if err := o.PublishHeads(ctx, b); err != nil && ctx.Err() == nil {
		n.log.Debug("publish heads", "err", err)
	}
}

// headsLoop announces heads periodically (the on-change announce is in write).
//
// Heartbeats carry heads too (see syncHeads), so this periodic announcement
// is a backstop, for machines that do not heartbeat (pending ones) and for
// lost messages: every 3 intervals, and not more often than every 2 s. It
// would otherwise be most of the gossip in a small org.
func (n *Node) headsLoop() {
	defer n.wg.Done()
	t := time.NewTicker(max(3*n.interval, 2*time.Second))
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
			n.announce(n.ctx)
		}
	}
}

// testHookHeads, set by benchmarks, sees each heads announcement before
// (before=true) and after its pushed entries are taken.
var testHookHeads atomic.Pointer[func(n *Node, pushed int, before bool)]

// onHeads handles a heads announcement from a peer: fetch what we lack.
func (n *Node) onHeads(from peer.ID, payload []byte) {
	var msg headsMsg
	if err := cbor.Unmarshal(payload, &msg); err != nil || len(msg.Heads) > 4096 || len(msg.Entries) > 4 {
		n.metrics.dropped.WithLabelValues("bad_heads").Inc()
		return
	}
	h := testHookHeads.Load()
	if h != nil {
		(*h)(n, len(msg.Entries), true)
	}
	if len(msg.Entries) > 0 {
		n.takePushed(msg.Entries)
	}
	if h != nil {
		(*h)(n, len(msg.Entries), false)
	}
	var want []cid.Cid
	n.mu.RLock()
	for _, b := range msg.Heads {
		c, err := cid.Cast(b)
		if err != nil {
			n.mu.RUnlock()
			n.metrics.dropped.WithLabelValues("bad_heads").Inc()
			return
		}
		if !n.lg.Has(c) {
			want = append(want, c)
		}
	}
	n.mu.RUnlock()
	if len(want) > 0 {
		n.spawn(func() { n.syncFrom(from, want) })
	}
}

// syncFrom fetches want and its missing ancestors from peer p. At most one
// sync per peer runs at a time.
//
// A new entry is named at once by every machine's next heartbeat, so without
// care a node would fetch it from each of them in parallel: a CID asked of
// one peer is not asked of another for wantRetry, unless that sync ends
// without it.
func (n *Node) syncFrom(p peer.ID, want []cid.Cid) {
	now := time.Now()
	n.mu.Lock()
	fresh := want[:0:0]
	for _, c := range want {
		k := c.KeyString()
		if at, ok := n.wanted[k]; ok && now.Sub(at) < wantRetry {
			continue
		}
		n.wanted[k] = now
		fresh = append(fresh, c)
	}
	if len(n.wanted) > 4096 {
		for k, at := range n.wanted {
			if now.Sub(at) >= wantRetry {
				delete(n.wanted, k)
			}
		}
	}
	want = fresh
	if len(want) == 0 {
		n.mu.Unlock()
		return
	}
	if n.syncing[p] {
		// A sync from p is running: queue the wants for its next round
		// rather than drop them.
		n.syncMore[p] = append(n.syncMore[p], want...)
		n.mu.Unlock()
		return
	}
	n.syncing[p] = true
	n.mu.Unlock()
	for {
		ctx, cancel := context.WithTimeout(n.ctx, 2*time.Minute)
		err := n.fetch(ctx, p, n.orgID(), want)
		cancel()
		if err != nil && n.ctx.Err() == nil {
			n.log.Debug("sync", "peer", p.String(), "err", err)
		}
		n.mu.Lock()
		for _, c := range want {
			delete(n.wanted, c.KeyString()) // got it, or another peer may be asked now
		}
		want = nil
		for _, c := range n.syncMore[p] {
			if !n.lg.Has(c) {
				want = append(want, c)
			}
		}
		delete(n.syncMore, p)
		if len(want) == 0 || n.ctx.Err() != nil {
			delete(n.syncing, p)
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
	}
}

// syncMargin is how far below our newest head (in clock, the DAG level) a
// fetch first asks: the answer is every entry above that floor leading to
// what we want, so a deep floor resends much of the ledger we have. Gaps
// deeper than the margin are found by walking back (see fetch).
const syncMargin = 64

// wantRetry is how long a CID asked of one peer is not asked of another.
const wantRetry = 2 * time.Second

// fetch pulls want (the peer's heads when empty) and their missing ancestors
// from p, verifying every block against its CID and signature, in parallel on
// every core, and storing them durably before they are folded.
func (n *Node) fetch(ctx context.Context, p peer.ID, org string, want []cid.Cid) error {
	n.mu.RLock()
	_, floor := n.lg.Heads()
	n.mu.RUnlock()
	if floor > 0 {
		// Entries we lack can sit below our newest head on concurrent branches;
		// ask a margin below it, and walk further back below if parents are
		// still missing.
		floor -= min(floor, syncMargin)
	}
	for round := 0; round < 64; round++ {
		// A pipeline: frames are verified (in parallel, on every core) as
		// they arrive, while the previous ones are stored and folded.
		fctx, fcancel := context.WithCancel(ctx)
		batches := make(chan []*ledger.Entry, 2)
		stored := make(chan error, 1)
		go func() {
			var err error
			for es := range batches {
				if err != nil {
					continue // drain
				}
				blocks := make([]store.Block, len(es))
				for i, e := range es {
					blocks[i] = store.Block{CID: e.CID(), Data: e.Bytes()}
				}
				if err = n.store.PutBlocks(blocks); err != nil {
					fcancel()
					continue
				}
				n.mu.Lock()
				n.addLocked(es)
				n.mu.Unlock()
			}
			stored <- err
		}()
		err := p2p.FetchBlocks(fctx, n.host.LibP2P(), p, org, want, floor, func(raw [][]byte) error {
			// The answer holds every entry above the floor that leads to
			// want, mostly ones we have: a hash is cheaper than a signature.
			n.mu.RLock()
			fresh := raw[:0:0]
			for _, r := range raw {
				if !n.lg.Has(ledger.CIDOf(r)) {
					fresh = append(fresh, r)
				}
			}
			n.mu.RUnlock()
			es, bad := verifyParallel(fresh)
			if bad > 0 {
				n.metrics.dropped.WithLabelValues("bad_block").Add(float64(bad))
			}
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
		n.mu.RLock()
		var missing []cid.Cid
		var minClock uint64
		for _, e := range n.waiting {
			for _, pc := range e.Parents {
				if !n.lg.Has(pc) && n.waiting[pc.KeyString()] == nil {
					missing = append(missing, pc)
					if minClock == 0 || e.Clock < minClock {
						minClock = e.Clock
					}
				}
			}
		}
		n.mu.RUnlock()
		if len(missing) == 0 {
			return nil
		}
		want = dedupCIDs(missing)
		if minClock > 256 {
			floor = minClock - 256
		} else {
			floor = 0
		}
	}
	return errors.New("sync did not converge")
}

func dedupCIDs(cs []cid.Cid) []cid.Cid {
	seen := map[string]bool{}
	out := cs[:0]
	for _, c := range cs {
		if !seen[c.KeyString()] {
			seen[c.KeyString()] = true
			out = append(out, c)
		}
	}
	if len(out) > 4096 {
		out = out[:4096]
	}
	return out
}

// verifyParallel decodes and verifies blocks on every core. It returns the
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
			for i := lo; i < hi; i++ {
				if e, err := ledger.Decode(raw[i]); err == nil {
					out[i] = e
				}
			}
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

// syncSource answers the sync protocol from the node's ledger.
type syncSource Node

func (s *syncSource) SyncOrg() string { return (*Node)(s).orgID() }

func (s *syncSource) Collect(want []cid.Cid, floor uint64, limit int) [][]byte {
	n := (*Node)(s)
	n.mu.RLock()
	defer n.mu.RUnlock()
	if len(want) == 0 {
		want, _ = n.lg.Heads()
	}
	seen := map[string]bool{}
	var found []*ledger.Entry
	stack := append([]cid.Cid(nil), want...)
	for len(stack) > 0 && len(found) < limit {
		c := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		k := c.KeyString()
		if seen[k] {
			continue
		}
		seen[k] = true
		e := n.lg.Get(c)
		if e == nil {
			continue
		}
		found = append(found, e)
		for _, p := range e.Parents {
			if pe := n.lg.Get(p); pe != nil && pe.Clock > floor {
				stack = append(stack, p)
			}
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Key().Less(found[j].Key()) })
	out := make([][]byte, len(found))
	for i, e := range found {
		out[i] = e.Bytes()
	}
	return out
}

func (s *syncSource) Announced(from peer.ID, heads []cid.Cid) {
	n := (*Node)(s)
	var want []cid.Cid
	n.mu.RLock()
	for _, h := range heads {
		if !n.lg.Has(h) {
			want = append(want, h)
		}
	}
	n.mu.RUnlock()
	if len(want) > 0 {
		n.spawn(func() { n.syncFrom(from, want) })
	}
}

// membership answers the gossip validators from the current State.
type membership Node

func (m *membership) IsMachine(id peer.ID) bool {
	n := (*Node)(m)
	n.mu.RLock()
	defer n.mu.RUnlock()
	mc := n.lg.State().Machines[id.String()]
	return mc != nil && (mc.Status == ledger.MachinePending || mc.Status == ledger.MachineApproved)
}

func (m *membership) IsApproved(id peer.ID) bool {
	n := (*Node)(m)
	n.mu.RLock()
	defer n.mu.RUnlock()
	mc := n.lg.State().Machines[id.String()]
	return mc != nil && mc.Status == ledger.MachineApproved
}

var _ p2p.LagAware = (*membership)(nil)

// HasHeads reports whether every head is in the log: if so, a sender this
// node does not know as a machine is provably not one (see p2p.LagAware);
// if not, this node may lag behind it.
func (m *membership) HasHeads(heads []string) bool {
	n := (*Node)(m)
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, h := range heads {
		c, err := cid.Decode(h)
		if err != nil {
			continue // not a head at all: proves nothing either way
		}
		if !n.lg.Has(c) {
			return false
		}
	}
	return true
}

// HasHeadsPayload is HasHeads for a heads announcement's payload.
func (m *membership) HasHeadsPayload(payload []byte) bool {
	var msg headsMsg
	if err := cbor.Unmarshal(payload, &msg); err != nil || len(msg.Heads) > 4096 {
		return true
	}
	n := (*Node)(m)
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, b := range msg.Heads {
		c, err := cid.Cast(b)
		if err != nil {
			continue
		}
		if !n.lg.Has(c) {
			return false
		}
	}
	return true
}

// takePushed verifies entries pushed in a heads announcement exactly as
// fetched blocks are (signature, canonical form, org), folds them and stores
// them durably. Entries whose parents are missing wait for the fetch that the
// announcement's heads trigger.
//
// The fold comes first, so the scheduler starts a new job's instances while
// the write is under way: on a busy host the write is the slowest step of
// taking a new entry. A pushed entry is not a write this node acknowledged,
// and one lost in a crash is fetched again from the peers that sent it; but a
// local write must never name a parent that is not durable, or the node would
// restart with a child whose parent it lacks, so write waits (persisting)
// until every folded entry is stored.
func (n *Node) takePushed(raw [][]byte) {
	org := n.orgID()
	var es []*ledger.Entry
	var blocks []store.Block
	for _, b := range raw {
		e, err := ledger.Decode(b)
		if err != nil || e.Org != org {
			n.metrics.dropped.WithLabelValues("bad_block").Inc()
			continue
		}
		n.mu.RLock()
		have := n.lg.Has(e.CID())
		n.mu.RUnlock()
		if have {
			continue
		}
		es = append(es, e)
		blocks = append(blocks, store.Block{CID: e.CID(), Data: e.Bytes()})
	}
	if len(es) == 0 {
		return
	}
	n.persisting.RLock()
	defer n.persisting.RUnlock()
	n.mu.Lock()
	n.addLocked(es)
	n.mu.Unlock()
	if err := n.store.PutBlocks(blocks); err != nil {
		n.log.Warn("could not store a pushed ledger entry; peers will send it again after a restart", "err", err)
	}
}
