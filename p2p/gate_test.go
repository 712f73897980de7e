package p2p

import (
	"bufio"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// ptShortGate shortens the gate's timings for a test.
func ptShortGate(t *testing.T) {
	t.Helper()
	p, sb, bf, se := Probation, StrangerBlock, BlockFor, SweepEvery
	Probation, StrangerBlock, BlockFor, SweepEvery = 500*time.Millisecond, time.Minute, time.Minute, 50*time.Millisecond
	t.Cleanup(func() { Probation, StrangerBlock, BlockFor, SweepEvery = p, sb, bf, se })
}

// ptLedger is a SyncSource and LogSource with one block and one log.
type ptLedger struct {
	mu        sync.Mutex
	org       string
	collected int
}

func (l *ptLedger) SyncOrg() string { return l.org }
func (l *ptLedger) Collect([]cid.Cid, uint64, int) [][]byte {
	l.mu.Lock()
	l.collected++
	l.mu.Unlock()
	return [][]byte{[]byte("job command: secret")}
}
func (l *ptLedger) Announced(peer.ID, []cid.Cid) {}
func (l *ptLedger) LogsOrg() string              { return l.org }
func (l *ptLedger) MaySee(peer.ID, string) error { return nil }
func (l *ptLedger) OpenLog(string, int64) (io.ReadCloser, int64, error) {
	return io.NopCloser(strings.NewReader("output")), 6, nil
}

// ptAdmits admits capabilities whose ID is current.
type ptAdmits struct{ current string }

func (a ptAdmits) Admit(org string, c ledger.Capability, _ peer.ID) error {
	if c.ID != a.current {
		return errors.New("this org key was rotated; ask an admin for the current one")
	}
	return nil
}

// ptServe runs every members-only service of the org on h.
func ptServe(h *Host, src *ptLedger) {
	ServeSync(h.LibP2P(), src)
	ServeLogs(h.LibP2P(), src)
	h.ServeAdmit(ptAdmits{current: "current"})
}

// ptFetchAll tries every way to read the org from p: a ledger block, the
// heartbeats, a log. It returns what it got.
func ptFetchAll(t *testing.T, from *Host, of *Org, p peer.ID) (blocks int, hbs int, log []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = FetchBlocks(ctx, from.LibP2P(), p, ptOrg, nil, 0, func(b [][]byte) error { blocks += len(b); return nil })
	if seen, err := of.FetchSeen(ctx, p); err == nil {
		hbs = len(seen)
	}
	log, _ = FetchLog(ctx, from.LibP2P(), p, LogsRequest{Org: ptOrg, Job: "j", Item: 1}, 1<<10)
	return blocks, hbs, log
}

// TestStrangerGetsNothing: a peer that knows the org's ID and a member's
// addresses, but is no machine of the org, gets no ledger block, no
// heartbeat (fetched or gossiped), no log, and no connection kept; a
// member connected the same way gets all of them (the control).
func TestStrangerGetsNothing(t *testing.T) {
	ptShortGate(t)
	a, member, oa, om, _ := ptPair(t)
	src := &ptLedger{org: ptOrg}
	ptServe(a, src)
	stranger := ptHost(t, nil)
	// The stranger runs the org's topics too, believing a is a machine, so
	// that it would keep whatever a sent it.
	os, err := stranger.JoinOrg(ptOrg, newPtMembers(a.ID(), stranger.ID()))
	if err != nil {
		t.Fatal(err)
	}
	got := &ptRecorder{}
	os.OnHeartbeat(got.add)
	memberGot := &ptRecorder{}
	om.OnHeartbeat(memberGot.add)

	ptConnect(t, member, a)
	ptConnect(t, stranger, a)
	ptWaitTopicPeer(t, om.hbTopic, a.ID())
	if err := oa.PublishHeartbeat(context.Background(), Heartbeat{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	fromA := func(h Heartbeat) bool { return h.Machine == a.ID().String() }
	ptEventually(t, 10*time.Second, "the member gets a's heartbeat", func() bool { return memberGot.has(fromA) })

	if b, hbs, log := ptFetchAll(t, member, om, a.ID()); b == 0 || hbs == 0 || string(log) != "output" {
		t.Fatalf("member got %d blocks, %d heartbeats, log %q; want all", b, hbs, log)
	}
	src.mu.Lock()
	before := src.collected
	src.mu.Unlock()
	if b, hbs, log := ptFetchAll(t, stranger, os, a.ID()); b != 0 || hbs != 0 || log != nil {
		t.Fatalf("stranger got %d blocks, %d heartbeats, log %q; want nothing", b, hbs, log)
	}
	src.mu.Lock()
	after := src.collected
	src.mu.Unlock()
	if after != before {
		t.Fatal("the ledger was read for the stranger")
	}
	ptEventually(t, 5*time.Second, "the stranger's score below the publish threshold", func() bool {
		sc, ok := a.PeerScore(stranger.ID())
		return ok && sc < peerScoreThresholds().PublishThreshold
	})
	if got.has(fromA) {
		t.Fatal("the stranger got a's heartbeat by gossip")
	}
	ptEventually(t, 10*time.Second, "the stranger's connection closed", func() bool {
		return a.LibP2P().Network().Connectedness(stranger.ID()) != network.Connected
	})
	if !a.Gate().IsBlocked(stranger.ID()) {
		t.Fatal("the stranger is not refused after its connection was closed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = stranger.Connect(ctx, a.Addrs()) // a's gater refuses it
	ptEventually(t, 5*time.Second, "the stranger's new connection refused", func() bool {
		return a.LibP2P().Network().Connectedness(stranger.ID()) != network.Connected
	})
	if a.LibP2P().Network().Connectedness(member.ID()) != network.Connected {
		t.Fatal("the member's connection was closed")
	}
}

// TestRotatedKeyAdmission: a joiner with a rotated org key is refused,
// gets no block and is cut off; one with the current key is admitted and
// gets the ledger (only: no heartbeats, no logs).
func TestRotatedKeyAdmission(t *testing.T) {
	ptShortGate(t)
	StrangerBlock = 0 // only the admission refusals block here (restored by ptShortGate)
	a := ptHost(t, nil)
	if _, err := a.JoinOrg(ptOrg, newPtMembers(a.ID())); err != nil {
		t.Fatal(err)
	}
	ptServe(a, &ptLedger{org: ptOrg})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // loaded CI hosts
	defer cancel()
	capOf := func(id string) ledger.Capability {
		return ledger.Capability{Org: ptOrg, Kind: ledger.CapOrgKey, ID: id, Role: ledger.RoleMember, Issuer: []byte{1}, Sig: []byte{1}}
	}

	old := ptHost(t, nil)
	ptConnect(t, old, a)
	err := old.Admit(ctx, a.ID(), ptOrg, capOf("old"))
	if !errors.Is(err, ErrAdmitRefused) || !strings.Contains(err.Error(), "rotated") {
		t.Fatalf("admission with a rotated key: %v; want a refusal that says it was rotated", err)
	}
	n := 0
	_ = FetchBlocks(ctx, old.LibP2P(), a.ID(), ptOrg, nil, 0, func(b [][]byte) error { n += len(b); return nil })
	if n != 0 {
		t.Fatalf("the holder of a rotated key got %d blocks", n)
	}
	ptEventually(t, 10*time.Second, "the refused joiner cut off", func() bool {
		return a.LibP2P().Network().Connectedness(old.ID()) != network.Connected
	})
	// It may try again at once (with the right key, say); refused
	// AdmitTries times, it is refused at the door.
	for i := 1; i < AdmitTries; i++ {
		if a.Gate().IsBlocked(old.ID()) {
			t.Fatalf("blocked after %d refusals; want %d", i, AdmitTries)
		}
		var err error
		ptEventually(t, 20*time.Second, "another admission attempt answered", func() bool {
			if err = old.Connect(ctx, a.Addrs()); err == nil {
				err = old.Admit(ctx, a.ID(), ptOrg, capOf("old"))
			}
			return errors.Is(err, ErrAdmitRefused)
		})
		if !errors.Is(err, ErrAdmitRefused) {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
	}
	// (The refusal is recorded once the joiner has read it.)
	ptEventually(t, 5*time.Second, "the joiner refused at the door", func() bool { return a.Gate().IsBlocked(old.ID()) })

	cur := ptHost(t, nil)
	ptConnect(t, cur, a)
	if err := cur.Admit(ctx, a.ID(), ptOrg, capOf("current")); err != nil {
		t.Fatalf("admission with the current key: %v", err)
	}
	n = 0
	if err := FetchBlocks(ctx, cur.LibP2P(), a.ID(), ptOrg, nil, 0, func(b [][]byte) error { n += len(b); return nil }); err != nil || n == 0 {
		t.Fatalf("admitted joiner: %d blocks, %v", n, err)
	}
	if log, err := FetchLog(ctx, cur.LibP2P(), a.ID(), LogsRequest{Org: ptOrg, Job: "j", Item: 1}, 1<<10); err == nil {
		t.Fatalf("an admitted joiner got a log: %q", log)
	}
	// Past the probation, the admitted joiner stays.
	deadline := time.Now().Add(3 * Probation)
	for time.Now().Before(deadline) {
		if a.LibP2P().Network().Connectedness(cur.ID()) != network.Connected {
			t.Fatal("the admitted joiner was cut off")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAdmitProofBound: a proof signed for another server (or another
// nonce) is refused, so one seen by a machine cannot be relayed.
func TestAdmitProofBound(t *testing.T) {
	ptShortGate(t)
	a := ptHost(t, nil)
	if _, err := a.JoinOrg(ptOrg, newPtMembers(a.ID())); err != nil {
		t.Fatal(err)
	}
	ptServe(a, &ptLedger{org: ptOrg})
	j := ptHost(t, nil)
	ptConnect(t, j, a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := ledger.Capability{Org: ptOrg, Kind: ledger.CapOrgKey, ID: "current", Role: ledger.RoleMember, Issuer: []byte{1}, Sig: []byte{1}}
	s, err := j.LibP2P().NewStream(ctx, a.ID(), AdmitProtocol)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, w := bufio.NewReader(s), bufio.NewWriter(s)
	b, err := hbReadFrame(r, maxAdmitFrame)
	if err != nil {
		t.Fatal(err)
	}
	var ch admitChallenge
	if err := syncDec.Unmarshal(b, &ch); err != nil {
		t.Fatal(err)
	}
	// Signed for another server: what a machine that saw the proof would
	// relay.
	proof := admitProof{Nonce: ch.Nonce, Joiner: j.ID().String(), Server: j.ID().String(), Cap: c}
	sb, _ := signedBytes(admitSigDomain, ptOrg, &proof)
	sig, _ := j.key.Sign(sb)
	if err := writeSyncFrame(w, admitRequest{Org: ptOrg, Cap: c, Sig: sig}); err != nil {
		t.Fatal(err)
	}
	if b, err = hbReadFrame(r, maxAdmitFrame); err != nil {
		t.Fatal(err)
	}
	var resp admitResponse
	if err := syncDec.Unmarshal(b, &resp); err != nil || resp.OK || !strings.Contains(resp.Err, "signature") {
		t.Fatalf("proof for another server: %+v, %v; want refused", resp, err)
	}
}

// TestDecodeAdmitRequest: malformed requests are refused with a line.
func TestDecodeAdmitRequest(t *testing.T) {
	for _, b := range [][]byte{nil, {0xff}, make([]byte, maxAdmitFrame+1)} {
		if _, err := decodeAdmitRequest(b); err == nil {
			t.Fatalf("decodeAdmitRequest(%x) accepted", b)
		}
	}
}

// TestMemberFloodCutOff: a member machine flooding the heartbeat topic has
// its excess dropped, falls below the graylist threshold at its peers, and
// is cut off, while another member's heartbeats still get through.
func TestMemberFloodCutOff(t *testing.T) {
	// A rate far below what even a loaded -race build publishes at, so the
	// flood is over it however slowly the 1000 heartbeats go out (at the
	// default 50/s, a host publishing at 60/s stayed under burst plus rate).
	hr := HeartbeatRate
	HeartbeatRate = RateLimit{PerSecond: 2, Burst: 20}
	t.Cleanup(func() { HeartbeatRate = hr })
	v, honest, ov, oh, m := ptPair(t)
	flooder := ptHost(t, nil)
	m.add(flooder.ID(), true)
	of, err := flooder.JoinOrg(ptOrg, m)
	if err != nil {
		t.Fatal(err)
	}
	got := &ptRecorder{}
	ov.OnHeartbeat(got.add)
	ptConnect(t, honest, v)
	ptConnect(t, flooder, v)
	ptConnect(t, flooder, honest)
	ptWaitTopicPeer(t, of.hbTopic, v.ID())
	ptWaitTopicPeer(t, oh.hbTopic, v.ID())
	ctx := context.Background()
	for i := 0; i < 1000; i++ {
		if err := of.PublishHeartbeat(ctx, Heartbeat{Name: "flood"}); err != nil {
			t.Fatal(err)
		}
	}
	ptEventually(t, 20*time.Second, "the flood dropped for its rate", func() bool { return ov.Ignored()["heartbeat/rate"] > 0 })
	ptEventually(t, 20*time.Second, "the flooder graylisted", func() bool {
		s, ok := v.PeerScore(flooder.ID())
		return ok && s < peerScoreThresholds().GraylistThreshold
	})
	fromF := func(h Heartbeat) bool { return h.Machine == flooder.ID().String() }
	if n := got.count(fromF); n > int(HeartbeatRate.Burst)+200 {
		t.Fatalf("%d of the flooder's 1000 heartbeats delivered; want about the burst of %v", n, HeartbeatRate.Burst)
	}
	// Others are unaffected.
	if err := oh.PublishHeartbeat(ctx, Heartbeat{Name: "honest"}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sh, _ := v.PeerScore(honest.ID())
		sf, _ := v.PeerScore(flooder.ID())
		t.Logf("scores honest %v flooder %v; rejected %v ignored %v; delivered from flooder %d", sh, sf, ov.Rejected(), ov.Ignored(), got.count(fromF))
	}()
	ptEventually(t, 10*time.Second, "the honest member's heartbeat delivered", func() bool {
		return got.has(func(h Heartbeat) bool { return h.Machine == honest.ID().String() && h.Name == "honest" })
	})
}

// TestDepartingMachineCutOff: a machine removed while connected may still
// fetch the ledger for DepartGrace (to learn that it is out), not a log;
// then its connection is closed.
func TestDepartingMachineCutOff(t *testing.T) {
	ptShortGate(t)
	dg := DepartGrace
	DepartGrace = time.Second
	t.Cleanup(func() { DepartGrace = dg })
	a, b, _, _, m := ptPair(t)
	ptServe(a, &ptLedger{org: ptOrg})
	ptConnect(t, b, a)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	g := a.Gate()
	ptEventually(t, 5*time.Second, "a sweep to see b as a machine", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.members[b.ID()]
	})
	m.remove(b.ID())
	ptEventually(t, 5*time.Second, "the removed machine departing", func() bool {
		return a.Gate().until(a.Gate().departing, b.ID(), time.Now())
	})
	n := 0
	if err := FetchBlocks(ctx, b.LibP2P(), a.ID(), ptOrg, nil, 0, func(bl [][]byte) error { n += len(bl); return nil }); err != nil || n == 0 {
		t.Fatalf("the departing machine's fetch: %d blocks, %v", n, err)
	}
	if _, err := FetchLog(ctx, b.LibP2P(), a.ID(), LogsRequest{Org: ptOrg, Job: "j", Item: 1}, 1<<10); err == nil {
		t.Fatal("the departing machine got a log")
	}
	ptEventually(t, 10*time.Second, "the removed machine cut off", func() bool {
		return a.LibP2P().Network().Connectedness(b.ID()) != network.Connected
	})
}

// TestGateClosedWhileHoldingOrg: a host that holds an org's ledger but has
// not joined its topics yet (a node starting, a join between fetching the
// ledger and JoinOrg) serves no block; with no org at all it is open.
func TestGateClosedWhileHoldingOrg(t *testing.T) {
	a := ptHost(t, nil)
	ServeSync(a.LibP2P(), &ptLedger{org: ptOrg})
	var holds atomic.Bool
	a.Gate().HoldsOrg(holds.Load)
	s := ptHost(t, nil)
	ptConnect(t, s, a)
	fetch := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n := 0
		_ = FetchBlocks(ctx, s.LibP2P(), a.ID(), ptOrg, nil, 0, func(b [][]byte) error { n += len(b); return nil })
		return n
	}
	if n := fetch(); n == 0 {
		t.Fatal("an open gate served nothing (the control)")
	}
	holds.Store(true)
	if n := fetch(); n != 0 {
		t.Fatalf("a stranger got %d blocks from a host holding an org", n)
	}
}

// TestPendingGetsNoHeartbeats (issue 20): a pending machine, subscribed
// to every topic of the org, is sent the ledger's heads and the offers (a
// newcomer sees the market, issue 18) but not the heartbeats that a
// machine it is connected to publishes; once approved it gets them (its
// subscriptions are learnt again: the approving node reconnects), and its
// own heartbeats are taken.
func TestPendingGetsNoHeartbeats(t *testing.T) {
	ptShortGate(t)
	pr := Probation
	Probation = time.Minute // not cut off meanwhile, and within its probation
	a, b := ptHost(t, nil), ptHost(t, nil)
	Probation = pr
	ma := newPtMembers(a.ID())
	ma.add(b.ID(), false) // pending, in a's ledger
	oa, err := a.JoinOrg(ptOrg, ma)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := b.JoinOrg(ptOrg, newPtMembers(a.ID(), b.ID()))
	if err != nil {
		t.Fatal(err)
	}
	accept := func(peer.ID, *OfferMsg) *OfferVerdict { return nil }
	ta, err := a.JoinOffers(ptOrg, accept)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.JoinOffers(ptOrg, accept)
	if err != nil {
		t.Fatal(err)
	}
	hbs, hbsAtA := &ptRecorder{}, &ptRecorder{}
	ob.OnHeartbeat(hbs.add)
	oa.OnHeartbeat(hbsAtA.add)
	var heads, offers atomic.Int64
	ob.OnHeads(func(peer.ID, []byte) { heads.Add(1) })
	tb.OnMessage(func(OfferMsg) { offers.Add(1) })
	ptConnect(t, b, a)
	ptWaitTopicPeer(t, oa.ledgerTopic, b.ID())
	ptWaitTopicPeer(t, ob.hbTopic, a.ID())

	ctx := context.Background()
	fromA := func(h Heartbeat) bool { return h.Machine == a.ID().String() }
	publish := func() {
		t.Helper()
		if err := oa.PublishHeartbeat(ctx, Heartbeat{Name: "a"}); err != nil {
			t.Fatal(err)
		}
		if err := ta.Publish(ctx, OfferMsg{Withdraw: &ledger.OfferWithdrawal{}}); err != nil {
			t.Fatal(err)
		}
	}
	// Heads published after a heartbeat and an offer, on the same
	// stream: once b has them, it would have had those too.
	for round := int64(1); round <= 2; round++ {
		publish()
		if err := oa.PublishHeads(ctx, []byte("heads")); err != nil {
			t.Fatal(err)
		}
		ptEventually(t, 10*time.Second, "the pending machine gets a's heads and offers", func() bool {
			return heads.Load() >= round && offers.Load() >= round
		})
	}
	if hbs.has(fromA) {
		t.Fatal("the pending machine got a's heartbeat")
	}
	if slices.Contains(oa.hbTopic.ListPeers(), b.ID()) {
		t.Fatal("a lists the pending machine as a subscriber of the heartbeat topic")
	}

	ma.add(b.ID(), true) // approved
	polls := 0
	ptEventually(t, 20*time.Second, "the approved machine gets a's heartbeats and offers, and a takes its heartbeats", func() bool {
		if polls++; polls%20 == 1 { // 5 a second, well within the rate limits
			publish()
			if err := ob.PublishHeartbeat(ctx, Heartbeat{Name: "b"}); err != nil {
				t.Fatal(err)
			}
		}
		return hbs.has(fromA) && offers.Load() > 0 && hbsAtA.has(func(h Heartbeat) bool { return h.Machine == b.ID().String() })
	})
}

// TestLateRefusalKeepsALaterAdmission: a refusal carried out after the same
// joiner was admitted on another stream cuts nothing.
func TestLateRefusalKeepsALaterAdmission(t *testing.T) {
	ptShortGate(t)
	a := ptHost(t, nil)
	if _, err := a.JoinOrg(ptOrg, newPtMembers(a.ID())); err != nil {
		t.Fatal(err)
	}
	j := ptHost(t, nil)
	ptConnect(t, j, a)
	refusedAt := time.Now().Add(-time.Millisecond)
	a.Gate().admitted(j.ID())
	a.Gate().refusedAdmission(j.ID(), refusedAt)
	if a.LibP2P().Network().Connectedness(j.ID()) != network.Connected {
		t.Fatal("a refusal from before the admission cut the admitted joiner off")
	}
	// A refusal after the admission still cuts.
	a.Gate().refusedAdmission(j.ID(), time.Now().Add(time.Hour))
	if a.LibP2P().Network().Connectedness(j.ID()) == network.Connected {
		t.Fatal("a refusal after the admission left the joiner connected")
	}
}
