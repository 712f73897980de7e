package replica

// Attacks on a replica by the peers it fetches from, each asserting no
// effect and bounded work: a peer that streams an endless chain is cut off
// after MaxFetchBlocks blocks of one answer; a peer that sends a long chain
// children first (orphans) makes the replica hold at most MaxWaitingBytes
// of them; undecodable blocks are counted and dropped. A real long chain
// (signed entries, streamed as generated) is in bigchain_test.go: it is
// folded whole, and a ledger longer than one answer is walked back and
// joined within the orphan caps. Forged blocks and
// undecodable announcements are in TestBadInputDropped. The ledger-level
// attacks (forged, replayed, unauthorised, back-dated entries; 10,000
// parents) are in ledger/attack_test.go.

import (
	"context"
	"strings"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// TestMillionBlockAnswerIsCutOff: a peer offers a new node a chain of
// 1,000,000 blocks in one answer (undecodable ones: the cheapest to send,
// the same cost to the receiver to hash, and no memory to keep). The fetch
// reads at most the cap (a test cap of 10,000; MaxFetchBlocks in
// production, the server's own limit per answer), then ends with an
// error; nothing is kept.
func TestMillionBlockAnswerIsCutOff(t *testing.T) {
	const offered, limit = 1_000_000, 10_000
	a := open(t, t.TempDir(), newSigner(t), Config{})
	org := genesis(t, a)
	good := a.Collect(nil, 0, 10)
	sent := 0
	var d drops
	b := open(t, t.TempDir(), newSigner(t), Config{Dropped: d.add, maxFetchBlocks: limit,
		Fetch: func(ctx context.Context, _ peer.ID, _ string, _ []cid.Cid, _ uint64, fn func([][]byte) error) error {
			if err := fn(good); err != nil {
				return err
			}
			junk := make([][]byte, 2048)
			for i := range junk {
				junk[i] = []byte{0xa1, byte(i), byte(i >> 8)}
			}
			for sent < offered {
				n := min(len(junk), offered-sent)
				sent += n
				if err := fn(junk[:n]); err != nil {
					return err
				}
			}
			return nil
		}})
	err := b.CatchUp(context.Background(), "a", org)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("catch-up of a 1,000,000-block answer: %v, want cut off", err)
	}
	if sent > limit+2048 {
		t.Errorf("the peer got %d blocks read before the cut-off; cap %d", sent, limit)
	}
	if got := d.get(DropBadBlock); got > limit {
		t.Errorf("%d undecodable blocks verified; cap %d", got, limit)
	}
	if b.Len() != a.Len() || b.StateHash() != a.StateHash() {
		t.Errorf("after the cut-off: %d entries (want %d), state %s (want %s)", b.Len(), a.Len(), b.StateHash(), a.StateHash())
	}
}

// TestOrphanChainBounded: a peer sends a new node a chain of valid entries
// of the org, children first, in frames of 64 (each entry waits for its
// parent, which comes later). The replica never holds more than
// maxWaitingBytes of them (a test cap of 1 MiB; MaxWaitingBytes in
// production) and drops them as orphans, without storing them; a sync from an honest peer then
// gives it the whole ledger.
func TestOrphanChainBounded(t *testing.T) {
	const n, capBytes = 400, 1 << 20
	s := newSigner(t)
	a := open(t, t.TempDir(), s, Config{})
	org := genesis(t, a)
	heads, clock := a.Heads()
	big := strings.Repeat("x", 10<<10)
	chain := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		e, err := s.Sign(org, ledger.KindOrgKey, ledger.OrgKey{KeyID: big[:len(big)-i]}, heads, clock, 1)
		if err != nil {
			t.Fatal(err)
		}
		chain = append(chain, e.Bytes())
		heads, clock = []cid.Cid{e.CID()}, e.Clock
	}
	genesisBlock := a.Collect(nil, 0, 1)
	var d drops
	honest := false
	b := open(t, t.TempDir(), newSigner(t), Config{Dropped: d.add, maxWaitingBytes: capBytes,
		Fetch: func(ctx context.Context, _ peer.ID, _ string, _ []cid.Cid, _ uint64, fn func([][]byte) error) error {
			if honest {
				return fn(a.Collect(nil, 0, 1<<20))
			}
			if err := fn(genesisBlock); err != nil {
				return err
			}
			for hi := len(chain); hi > 0; hi -= 64 {
				lo := max(hi-64, 0)
				if err := fn(chain[lo:hi]); err != nil {
					return err
				}
			}
			return nil
		}})
	_ = b.CatchUp(context.Background(), "a", org)
	b.mu.RLock()
	peak, held := b.waitPeak, len(b.waiting)
	b.mu.RUnlock()
	if peak > capBytes+64*(11<<10) {
		t.Errorf("orphans took up to %d bytes; cap %d (and one frame)", peak, capBytes)
	}
	if d.get(DropOrphans) == 0 {
		t.Errorf("no orphans dropped (peak %d bytes, %d held)", peak, held)
	}
	// Nor are they on disk: the store holds the log's entries only.
	stored := 0
	if err := b.st.ForEachBlock(func(cid.Cid, []byte) error { stored++; return nil }); err != nil {
		t.Fatal(err)
	}
	if stored != b.Len() {
		t.Errorf("the store holds %d blocks for a log of %d entries: orphans were stored", stored, b.Len())
	}
	// The chain's entries are valid: an honest peer's answer brings them.
	for i := range chain {
		if _, err := a.lg.AddBatch([]*ledger.Entry{mustDecode(t, chain[i])}); err != nil {
			t.Fatal(err)
		}
	}
	a.mu.Lock()
	a.publishLocked() // added behind the replica's back: its snapshot too
	a.mu.Unlock()
	honest = true
	if err := b.CatchUp(context.Background(), "a", org); err != nil {
		t.Fatal(err)
	}
	if b.Len() != n+1 || b.StateHash() != a.StateHash() {
		t.Errorf("after an honest sync: %d entries (want %d), state %s (want %s)", b.Len(), n+1, b.StateHash(), a.StateHash())
	}
}

func mustDecode(t *testing.T, raw []byte) *ledger.Entry {
	t.Helper()
	e, err := ledger.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
