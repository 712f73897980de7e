// Package replica replicates one org's ledger on one machine
// (docs/design.md §7).
//
// # What it owns
//
// A Replica holds the ledger.Log (the DAG and its folded State), the Badger
// store the entries are durable in, and everything that moves entries between
// the two and the network:
//
//   - loading: Open starts at the stored checkpoint, if any, and reads
//     back and folds every stored entry but those below it (compact.go);
//   - compaction: the Log keeps the entries from a barrier on, those below
//     move to the store's history, still served to peers, and are pruned
//     after ledger.retain and exported (compact.go, prune.go);
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
	DropPruned   = "pruned"    // an entry naming a parent pruned before pruning kept clocks (compact.go)
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

	pruneMu sync.Mutex // one Prune at a time (prune.go)

	// belowSeen: CIDs known to sort below the Log's start belowOf (see
	// dropBelowLocked). Under mu.
	belowSeen map[string]bool
	belowOf   *ledger.Entry
	// rebuildFailed: rebuildLocked could not fold history again (it is
	// not tried again). Under mu.
	rebuildFailed bool
	// rebuilt: rebuildLocked folded all of history again since the last
	// compaction (which then moves back what is after its new start).
	rebuilt bool

	arch archiver // archive.go
}

// openBatch is how many stored blocks Open decodes together.
const openBatch = 1024

// Open starts at st's stored checkpoint, if any (checkpoint.go), reads
// every other entry in st but those in its history (compact.go), folds
// them, and returns the Replica. Entries
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
	es = r.belowStart(es) // compact.go
	r.archiveLocked()     // archive.go
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
		if r.waiting[k] == nil && !r.lg.Has(e.CID()) && !r.inHistoryLocked(e.CID()) {
			r.waiting[k] = e
			r.waitBytes += len(e.Bytes())
		}
	}
	r.waitPeak = max(r.waitPeak, r.waitBytes)
	r.dropBelowLocked() // compact.go
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
			if !ready[p.KeyString()] && !r.lg.Has(p) && !r.linkBelowLocked(p) {
				ok = false
				r.refusePrunedLocked(e, p) // compact.go
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
		r.linkPrevsLocked(part) // compact.go
		errs, err := r.lg.AddBatch(part)
		if err != nil {
			r.log.Debug("ledger: some entries were not added", "err", err)
		}
		if r.lg.BelowStart() && !r.rebuildFailed {
			r.rebuildFailed = !r.rebuildLocked() // compact.go
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
