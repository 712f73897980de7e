// Package replica replicates one org's ledger on one machine
// (docs/design.md §7).
//
// # What it owns
//
// A Replica holds the ledger.Log (the DAG and its folded State), the Badger
// store the entries are durable in, and everything that moves entries between
// the two and the network:
//
//   - loading: Open reads every stored entry back and folds it;
//   - the write path (Write): parents chosen from the heads, signed with the
//     machine's key, stored durably (SyncWrites) before they are folded, then
//     announced with the entry pushed inline when it is small;
//   - entries from peers: heads announcements, which may carry the new entry
//     itself (OnHeads), heads named by heartbeats (WantHeads), and the fetch
//     pipeline (SyncFrom, CatchUp): blocks verified against their CID and
//     signature in parallel on every core as they arrive, stored, folded;
//   - the orphans (entries whose parents have not arrived), the CIDs asked of
//     some peer, and which peer a sync is running from; the walk back down
//     a ledger longer than one answer or than the orphans it may hold
//     (walkback.go);
//   - the answers to peers: p2p.SyncSource (SyncOrg, Collect, Announced) and
//     p2p.Membership with p2p.LagAware (IsMachine, IsApproved, HasHeads,
//     HasHeadsPayload), from the current State.
//
// It imports nothing of the node, nor of p2p (the layers point one way: p2p
// imports ledger): it meets p2p's interfaces by its methods alone, which
// p2p's tests assert (p2p/replica_test.go), and the node hands it the few
// effects it cannot own (fetch a peer's blocks, publish a heads
// announcement, run a goroutine the node waits for, count a drop, learn that
// entries were added) through Config.
//
// # Invariants
//
//   - An entry is in the Log only once its parents are; others wait.
//   - A fetched entry is durable before it is folded. A pushed entry may be
//     folded first (so the node reacts at gossip speed), but a local write
//     never names a parent that is not yet durable (see takePushed).
//   - Every input from a peer is decoded and verified before it reaches the
//     Log; what fails is dropped and counted. Entries that arrive together
//     (a sync answer, a heads announcement, the store at Open) have their
//     signatures checked in batches (ledger.DecodeBatch).
package replica

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
)

// Reasons passed to Config.Dropped.
const (
	DropInvalid  = "invalid"   // an entry the Log refused (it is not kept)
	DropNoEffect = "no_effect" // an entry kept in the DAG without effect
	DropBadHeads = "bad_heads" // a heads announcement that does not decode
	DropBadBlock = "bad_block" // a block that fails decoding or verification
	DropOrphans  = "orphans"   // entries waiting for parents, dropped over MaxWaiting(Bytes)
)

// FetchFunc asks peer p for the entries of org reachable back from want (its
// heads when want is empty) above floor, and calls fn with each batch of raw
// blocks as it arrives. It is p2p.FetchBlocks bound to a host.
type FetchFunc func(ctx context.Context, p peer.ID, org string, want []cid.Cid, floor uint64, fn func(raw [][]byte) error) error

// Config holds a Replica's collaborators. Every field is optional.
type Config struct {
	// Logger; default discard.
	Logger *slog.Logger
	// Fetch fetches blocks from a peer; without it every sync fails.
	Fetch FetchFunc
	// FetchCheckpoint fetches a peer's newest checkpoint (p2p.FetchCheckpoint):
	// CatchUp on an empty ledger starts there (checkpoint.go). Optional.
	FetchCheckpoint func(ctx context.Context, p peer.ID, org string) (Offer, error)
	// Publish sends a heads announcement on the org's ledger topic; without
	// it nothing is announced. An error is logged at debug level.
	Publish func(ctx context.Context, payload []byte) error
	// Spawn runs fn on a goroutine its caller waits for; fn returns soon
	// after Close. Default: a goroutine Close waits for.
	Spawn func(fn func())
	// Now is the clock (entries' wall time, sync bookkeeping); default
	// time.Now.
	Now func() time.Time
	// Dropped counts n inputs dropped or kept without effect, by reason
	// (one of the Drop constants).
	Dropped func(reason string, n int)
	// OnAdded is called, without any lock of the Replica held, with the
	// entries that entered the Log (by a write, a fetch, a push or Import;
	// not by Open).
	OnAdded func(added []*ledger.Entry)
	// HeadsHook, for benchmarks, sees each heads announcement before
	// (before=true) and after its pushed entries are taken.
	HeadsHook func(pushed int, before bool)

	// For tests: the caps below, when not zero.
	maxWaiting, maxWaitingBytes, maxFetchBlocks int
}

// Bounds of what peers can make a replica hold or read.
const (
	// MaxWaiting and MaxWaitingBytes cap the entries held while their
	// parents have not arrived: a peer that sends orphans (a chain
	// children first, or entries whose parents do not exist) makes the
	// replica drop them all once either is exceeded.
	MaxWaiting      = 100000
	MaxWaitingBytes = 64 << 20
	// MaxFetchBlocks caps the blocks one answer of a fetch may carry (the
	// server's own limit per answer): a peer that streams more is cut off.
	// A deeper chain is fetched in several rounds.
	MaxFetchBlocks = 1 << 20
)

// Replica is one org's ledger on this machine. Its methods are safe for
// concurrent use.
type Replica struct {
	cfg    Config
	log    *slog.Logger
	st     *store.Store
	signer *ledger.Signer
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // goroutines of the default Spawn

	mu     sync.RWMutex
	lg     *ledger.Log
	capped []string // the Log's capped machines as last logged (cap.go)
	// snap is the State as of the last fold, frozen (see Snapshot):
	// swapped under mu after each batch of folds, read without any lock.
	snap    atomic.Pointer[Snapshot]
	waiting map[string]*ledger.Entry // entries whose parents have not arrived
	sentBy  map[string]string        // waiting entries their author sent itself, by CID key (cap.go)
	// waitBytes is the size of the waiting entries; waitPeak the most
	// bytes they ever took (tests).
	waitBytes, waitPeak int
	syncing             map[peer.ID]bool
	syncMore            map[peer.ID][]cid.Cid // wants that arrived while a sync from that peer ran
	wanted              map[string]time.Time  // CIDs asked of some peer, and when (see SyncFrom)
	// lastAdded is when the last entry was added, or the Replica opened.
	lastAdded time.Time
	lastSync  time.Time
	lastPeer  peer.ID

	writeMu sync.Mutex // serialises local writes so each names the latest heads
	// persisting is read-held by takePushed from the fold of a pushed entry
	// until its durable write ends; Write takes it to name only durable
	// parents (see takePushed).
	persisting sync.RWMutex

	headsMu sync.Mutex
	// haveHeads is, per machine, the heads its last heartbeat named when
	// this replica had every one of them (see WantHeads).
	haveHeads map[string][]string

	// lost is the frontier below the waiting entries last dropped over the
	// caps (the lowest), and lostClock its entries' clock; lostDrops counts
	// the drops (see walkback.go). Under mu.
	lost      []cid.Cid
	lostClock uint64
	lostDrops int

	ckMu sync.Mutex
	ck   offerCache // checkpoint.go
}

// openBatch is how many stored blocks Open decodes together.
const openBatch = 1024

// Open reads every entry in st, folds them, and returns the Replica. Entries
// are signed with signer. The caller keeps st, and closes it after Close.
func Open(st *store.Store, signer *ledger.Signer, cfg Config) (*Replica, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.maxWaiting == 0 {
		cfg.maxWaiting = MaxWaiting
	}
	if cfg.maxWaitingBytes == 0 {
		cfg.maxWaitingBytes = MaxWaitingBytes
	}
	if cfg.maxFetchBlocks == 0 {
		cfg.maxFetchBlocks = MaxFetchBlocks
	}
	lg, err := openAt(st) // checkpoint.go
	if err != nil {
		return nil, err
	}
	r := &Replica{cfg: cfg, log: cfg.Logger, st: st, signer: signer, lg: lg,
		waiting: map[string]*ledger.Entry{}, sentBy: map[string]string{}, syncing: map[peer.ID]bool{}, syncMore: map[peer.ID][]cid.Cid{},
		wanted: map[string]time.Time{}, haveHeads: map[string][]string{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if r.cfg.Spawn == nil {
		r.cfg.Spawn = func(fn func()) {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				fn()
			}()
		}
	}
	var (
		es   []*ledger.Entry
		cids []cid.Cid
		raws [][]byte
	)
	decode := func() { // what was read so far, with batched signature checks
		out, errs := ledger.DecodeBatchWithCID(cids, raws)
		for i, e := range out {
			if e == nil {
				r.log.Warn("dropping a stored block that does not decode", "cid", cids[i].String(), "err", errs[i])
				continue
			}
			es = append(es, e)
		}
		cids, raws = cids[:0], raws[:0]
	}
	err = st.ForEachBlock(func(c cid.Cid, data []byte) error {
		cids, raws = append(cids, c), append(raws, data)
		if len(raws) == openBatch {
			decode()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	decode()
	r.mu.Lock()
	r.addLocked(es)
	r.publishLocked()
	r.lastAdded = r.cfg.Now() // a node just started does not yet know who is online
	r.mu.Unlock()
	return r, nil
}

// Close stops the background syncs and waits for those it started itself
// (those run by Config.Spawn are the caller's to wait for). It does not close
// the store.
func (r *Replica) Close() {
	r.cancel()
	r.wg.Wait()
}

// Reader is the read side of the Log; see ReadLog.
type Reader interface {
	State() *ledger.State
	StateHash() string // State().Hash(), kept per fold
	Org() string
	Len() int
	Has(c cid.Cid) bool
	Get(c cid.Cid) *ledger.Entry
	Heads() ([]cid.Cid, uint64)
	Effective(c cid.Cid) bool
	Entries() []*ledger.Entry
}

// Snapshot is the ledger as of one fold (or batch of folds): its State,
// frozen, and the DAG's size and heads then. Nothing changes it: it is
// read without any lock, kept as long as wanted, and shared by every
// reader; the fold goes on with a copy of the State that shares what it
// does not write (ledger/cow.go).
type Snapshot struct {
	State *ledger.State
	// Len is the number of entries in the DAG; Heads its heads, sorted
	// by CID, and Clock the largest clock among them.
	Len   int
	Heads []cid.Cid
	Clock uint64

	hashOnce sync.Once
	hash     string
}

// StateHash is State.Hash(), computed once per snapshot.
func (s *Snapshot) StateHash() string {
	s.hashOnce.Do(func() { s.hash = s.State.Hash() })
	return s.hash
}

// publishLocked swaps in a snapshot of the Log as it is now, when it
// changed. r.mu must be held.
func (r *Replica) publishLocked() {
	if old := r.snap.Load(); old != nil && old.State == r.lg.State() && old.Len == r.lg.Len() {
		return
	}
	r.noteCappedLocked()
	heads, clock := r.lg.Heads()
	r.snap.Store(&Snapshot{State: r.lg.Snapshot(), Len: r.lg.Len(), Heads: heads, Clock: clock})
}

// Snapshot is the ledger as of the last fold; it takes no lock (see
// Snapshot).
func (r *Replica) Snapshot() *Snapshot { return r.snap.Load() }

// View runs fn with the State as of the last fold (Snapshot), holding no
// lock: a slow fn delays no fold. fn must not modify the State; it may
// keep it, and call the Replica.
func (r *Replica) View(fn func(st *ledger.State)) {
	fn(r.snap.Load().State)
}

// TryView is View; it always runs fn and reports true. (Kept for the
// monitors that once had to skip a look while a fold held the lock.)
func (r *Replica) TryView(fn func(st *ledger.State)) bool {
	r.View(fn)
	return true
}

// ReadLog read-locks the Log and returns it with the function that unlocks
// it. Until then the caller must not call the Replica, and the lock delays
// every fold: it is for reading the DAG (Has, Get, Effective, Entries).
// Readers of the State, heads or hash use Snapshot or View.
func (r *Replica) ReadLog() (Reader, func()) {
	r.mu.RLock()
	return r.lg, r.mu.RUnlock
}

// Org is the org ID, once genesis is known ("" before).
func (r *Replica) Org() string { return r.snap.Load().State.Org }

// Heads are the entries without children, sorted by CID, and the largest
// clock among them.
func (r *Replica) Heads() ([]cid.Cid, uint64) {
	s := r.snap.Load()
	return append([]cid.Cid(nil), s.Heads...), s.Clock
}

// Len is the number of entries in the DAG.
func (r *Replica) Len() int { return r.snap.Load().Len }

// Has reports whether the entry is in the Log.
func (r *Replica) Has(c cid.Cid) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lg.Has(c)
}

// Get returns an entry of the Log by CID, or nil.
func (r *Replica) Get(c cid.Cid) *ledger.Entry {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lg.Get(c)
}

// StateHash is the hash of the current State.
func (r *Replica) StateHash() string { return r.snap.Load().StateHash() }

// LastAdded is when an entry was last added, or the Replica opened.
func (r *Replica) LastAdded() time.Time {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lastAdded
}

// LastSync is the peer a fetch last completed from without error (even when
// nothing was missing), and when; zero values before any.
func (r *Replica) LastSync() (peer.ID, time.Time) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.lastPeer, r.lastSync
}

// dropped counts k inputs dropped for reason.
func (r *Replica) dropped(reason string, k int) {
	if r.cfg.Dropped != nil && k > 0 {
		r.cfg.Dropped(reason, k)
	}
}

// add folds es, sent by peer src (none: local), and reports what was
// added (see addLocked; the gate of cap.go).
func (r *Replica) add(src peer.ID, es []*ledger.Entry) []*ledger.Entry {
	r.mu.Lock()
	r.markSentLocked(src, es)
	added := r.addLocked(es)
	r.publishLocked()
	r.mu.Unlock()
	r.notify(added)
	return added
}

func (r *Replica) notify(added []*ledger.Entry) {
	if len(added) > 0 && r.cfg.OnAdded != nil {
		r.cfg.OnAdded(added)
	}
}

// addLocked adds entries whose parents are known (now or once they arrive),
// keeping the others waiting. r.mu must be held. It returns the entries that
// entered the log.
func (r *Replica) addLocked(es []*ledger.Entry) []*ledger.Entry {
	for _, e := range es {
		k := e.CID().KeyString()
		if r.waiting[k] == nil && !r.lg.Has(e.CID()) {
			r.waiting[k] = e
			r.waitBytes += len(e.Bytes())
		}
	}
	r.waitPeak = max(r.waitPeak, r.waitBytes)
	var added []*ledger.Entry
	// The total order is topological, so one pass in order finds every entry
	// whose ancestors are all present.
	pend := make([]*ledger.Entry, 0, len(r.waiting))
	for _, e := range r.waiting {
		pend = append(pend, e)
	}
	sort.Slice(pend, func(i, j int) bool { return pend[i].Key().Less(pend[j].Key()) })
	ready := map[string]bool{}
	var batch []*ledger.Entry
	for _, e := range pend {
		ok := true
		for _, p := range e.Parents {
			if !ready[p.KeyString()] && !r.lg.Has(p) {
				ok = false
				break
			}
		}
		if ok && (e.Kind == ledger.KindGenesis || r.lg.Len() > 0 || len(batch) > 0) {
			ready[e.CID().KeyString()] = true
			batch = append(batch, e)
		}
	}
	for len(batch) > 0 {
		var part []*ledger.Entry
		part, batch = r.gateLocked(batch) // cap.go
		if len(part) == 0 {
			continue
		}
		for _, e := range part {
			delete(r.waiting, e.CID().KeyString())
			delete(r.sentBy, e.CID().KeyString())
			r.waitBytes -= len(e.Bytes())
		}
		errs, err := r.lg.AddBatch(part)
		if err != nil {
			r.log.Debug("ledger: some entries were not added", "err", err)
		}
		for i, e := range part {
			switch {
			case !r.lg.Has(e.CID()):
				r.dropped(DropInvalid, 1)
			default:
				added = append(added, e)
				if errs != nil && errs[i] != nil {
					r.dropped(DropNoEffect, 1)
				}
			}
		}
	}
	if len(r.waiting) > r.cfg.maxWaiting || r.waitBytes > r.cfg.maxWaitingBytes {
		// A peer is flooding us with orphans, or the ledger is longer than
		// we may hold: keep where they stopped (see walkback.go).
		r.keepFrontierLocked()
		r.dropped(DropOrphans, len(r.waiting))
		r.waiting, r.sentBy, r.waitBytes = map[string]*ledger.Entry{}, map[string]string{}, 0
	}
	if len(added) > 0 {
		r.lastAdded = r.cfg.Now()
	}
	return added
}
