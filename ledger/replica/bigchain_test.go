package replica

// A real long ledger offered to a new node (issue 20, item 5): a peer that
// streams a chain of signed entries, generated as they are sent, so that
// the test holds one frame of them at a time; the heap of the whole
// process is sampled while the new node takes them.

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// chain is a ledger of n+1 entries by one author: its genesis, then n org
// key rotations, each naming the one before. It is generated, the same
// every time, as it is read.
type chain struct {
	s   *ledger.Signer
	n   int
	org string
	g   *ledger.Entry
}

func newChain(tb testing.TB, n int) *chain {
	tb.Helper()
	var seed [32]byte
	seed[0] = 0xc4
	k, err := crypto.UnmarshalEd25519PrivateKey(ed25519.NewKeyFromSeed(seed[:]))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := ledger.NewSigner(k)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := s.Sign("", ledger.KindGenesis, ledger.Genesis{Name: "big", OrgKeyID: "k", Settings: ledger.DefaultSettings()}, nil, 0, 1)
	if err != nil {
		tb.Fatal(err)
	}
	return &chain{s: s, n: n, org: g.CID().String(), g: g}
}

// stream sends the chain's entries above floor (by clock; the genesis has
// clock 1), oldest first, in frames of 2048 (p2p.SyncBatch), as an honest
// peer answers a fetch of a ledger that fits one answer.
func (c *chain) stream(ctx context.Context, floor uint64, fn func([][]byte) error) error {
	frame := make([][]byte, 0, 2048)
	send := func(b []byte, last bool) error {
		frame = append(frame, b)
		if len(frame) == cap(frame) || last {
			if err := ctx.Err(); err != nil {
				return err
			}
			err := fn(frame)
			frame = make([][]byte, 0, 2048) // fn may keep the last one
			return err
		}
		return nil
	}
	e := c.g
	if e.Clock > floor {
		if err := send(e.Bytes(), c.n == 0); err != nil {
			return err
		}
	}
	for i := 1; i <= c.n; i++ {
		next, err := c.s.Sign(c.org, ledger.KindOrgKey, ledger.OrgKey{KeyID: "k" + strconv.Itoa(i)}, []cid.Cid{e.CID()}, e.Clock, int64(1+i))
		if err != nil {
			return err
		}
		e = next
		if e.Clock <= floor {
			continue
		}
		if err := send(e.Bytes(), i == c.n); err != nil {
			return err
		}
	}
	return nil
}

// heapPeak samples the process's live heap every 10 ms until stop is
// called, which returns the highest sample.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done, finished := make(chan struct{}), make(chan struct{})
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > peak.Load() {
			peak.Store(ms.HeapAlloc)
		}
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		sample()
		return peak.Load()
	}
}

// chainSize is the length of the chain the long tests offer: n, or
// CSHARE_CHAIN_ENTRIES when set (to measure other sizes).
func chainSize(tb testing.TB, n int) int {
	if v := os.Getenv("CSHARE_CHAIN_ENTRIES"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			tb.Fatalf("CSHARE_CHAIN_ENTRIES=%q: want a positive whole number", v)
		}
		return k
	}
	return n
}

// joinChain has a new replica catch up with c from a peer that streams it,
// and reports the time it took and the heap's peak meanwhile.
func joinChain(t *testing.T, c *chain, cfg Config) (*Replica, time.Duration, uint64, error) {
	t.Helper()
	cfg.Fetch = func(ctx context.Context, _ peer.ID, org string, _ []cid.Cid, floor uint64, fn func([][]byte) error) error {
		if org != c.org {
			return fmt.Errorf("not a node of org %s", org)
		}
		return c.stream(ctx, floor, fn)
	}
	b := open(t, t.TempDir(), newSigner(t), cfg)
	runtime.GC()
	stop := heapPeak()
	start := time.Now()
	err := b.CatchUp(context.Background(), "a", c.org)
	took := time.Since(start)
	peak := stop()
	return b, took, peak, err
}

// TestLongLedgerJoin: a new node joins an org whose ledger is a chain of
// 20,000 entries, twenty times the orphans it may hold (a test cap of
// 1,000): the peer answers oldest first, so each frame folds as it arrives
// and none waits. The node takes all of it, reaches the author's State, and
// serves it on; the process's heap stays within 64 MiB and 4 KiB an entry
// (the Log keeps every entry in memory). CSHARE_CHAIN_ENTRIES=n offers n
// entries against the production caps instead, to measure: -v logs the
// time, the heap's peak and the live heap after. -short skips it.
func TestLongLedgerJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("a long ledger: -short skips it")
	}
	n := chainSize(t, 20_000)
	cfg := Config{}
	if os.Getenv("CSHARE_CHAIN_ENTRIES") == "" {
		cfg.maxWaiting, cfg.maxWaitingBytes = 1000, 256<<10
	}
	c := newChain(t, n)
	var d drops
	cfg.Dropped = d.add
	b, took, peak, err := joinChain(t, c, cfg)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	per := func(v uint64) uint64 { return v / uint64(max(b.Len(), 1)) }
	t.Logf("%d entries taken in %v, heap peak %d MiB (%d B/entry), live after %d MiB (%d B/entry)",
		b.Len(), took.Round(time.Millisecond), peak>>20, per(peak), ms.HeapAlloc>>20, per(ms.HeapAlloc))
	if err != nil {
		t.Fatalf("catch-up: %v", err)
	}
	if b.Len() != n+1 {
		t.Fatalf("%d entries, want %d", b.Len(), n+1)
	}
	var got string
	b.View(func(st *ledger.State) { got = st.OrgKeyID })
	if got != "k"+strconv.Itoa(n) {
		t.Errorf("org key %q, want the last rotation's k%d", got, n)
	}
	if k := d.get(DropOrphans) + d.get(DropInvalid) + d.get(DropBadBlock); k > 0 {
		t.Errorf("%d entries dropped", k)
	}
	if bound := uint64(64<<20 + 4<<10*n); peak > bound {
		t.Errorf("heap peak %d MiB; bound %d MiB", peak>>20, bound>>20)
	}
	if got := len(b.Collect(nil, uint64(n-9), 100)); got != 10 {
		t.Errorf("the node serves %d of the newest 10 entries", got)
	}
}

// cutPeer answers fetches of a chain the way an honest peer does when the
// ledger is longer than one answer: the entries on the chain leading to
// want (its head when empty) above floor, the newest limit of them, oldest
// first. It counts the blocks it sends.
type cutPeer struct {
	entries [][]byte       // entry i has clock i+1
	index   map[string]int // CID key -> i
	limit   int
	sent    int
}

func newCutPeer(tb testing.TB, c *chain, limit int) *cutPeer {
	tb.Helper()
	p := &cutPeer{index: map[string]int{}, limit: limit}
	if err := c.stream(context.Background(), 0, func(raw [][]byte) error {
		for _, b := range raw {
			p.index[ledger.CIDOf(b).KeyString()] = len(p.entries)
			p.entries = append(p.entries, b)
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
	return p
}

func (p *cutPeer) fetch(ctx context.Context, _ peer.ID, _ string, want []cid.Cid, floor uint64, fn func([][]byte) error) error {
	top := len(p.entries) - 1
	if len(want) > 0 {
		top = -1
		for _, c := range want {
			if i, ok := p.index[c.KeyString()]; ok {
				top = max(top, i)
			}
		}
	}
	lo := max(int(floor), top-p.limit+1, 0) // clock i+1 > floor
	for i := lo; i <= top; i += 2048 {
		hi := min(i+2048, top+1)
		p.sent += hi - i
		if err := fn(p.entries[i:hi]); err != nil {
			return err
		}
	}
	return nil
}

// TestLedgerLongerThanAnAnswerJoins: a new node joins an org whose ledger
// (6,000 entries) is longer than one answer of its peer (1,000: the newest
// ones, whose parents it lacks) and than the orphans it may hold (2,000).
// It walks back to where the chain meets what it has, keeping only where
// it stopped, then folds forward: it takes the whole ledger in one
// catch-up, never holding more than its cap of orphans (and a frame).
func TestLedgerLongerThanAnAnswerJoins(t *testing.T) {
	const n, limit, capN = 6000, 1000, 2000
	c := newChain(t, n)
	p := newCutPeer(t, c, limit)
	var d drops
	b := open(t, t.TempDir(), newSigner(t), Config{Dropped: d.add, Fetch: p.fetch, maxWaiting: capN})
	if err := b.CatchUp(context.Background(), "a", c.org); err != nil {
		t.Errorf("catch-up: %v", err)
	}
	b.mu.RLock()
	held, peak := len(b.waiting), b.waitPeak
	b.mu.RUnlock()
	if peak > (capN+2048)*300 { // entries of ~200 bytes; a frame over the cap at most
		t.Errorf("orphans took up to %d bytes", peak)
	}
	if b.Len() != n+1 {
		t.Fatalf("%d entries after a catch-up, want %d (%d orphans held, %d dropped, %d blocks sent)", b.Len(), n+1, held, d.get(DropOrphans), p.sent)
	}
	var got string
	b.View(func(st *ledger.State) { got = st.OrgKeyID })
	if got != "k"+strconv.Itoa(n) {
		t.Errorf("org key %q, want k%d", got, n)
	}
	t.Logf("%d blocks sent for a ledger of %d, orphans up to %d bytes", p.sent, n+1, peak)
}
