package p2p

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"
)

type ptVictim struct {
	h   *Host
	o   *Org
	m   *ptMembers
	reg *prometheus.Registry
	rec *ptRecorder
}

func newPtVictim(t *testing.T) *ptVictim {
	t.Helper()
	v := &ptVictim{reg: prometheus.NewRegistry(), rec: &ptRecorder{}}
	v.h = ptHost(t, v.reg)
	v.m = newPtMembers(v.h.ID())
	o, err := v.h.JoinOrg(ptOrg, v.m)
	if err != nil {
		t.Fatal(err)
	}
	v.o = o
	o.OnHeartbeat(v.rec.add)
	return v
}

// ptRaw is a peer that speaks to the org's topic without our validators: it
// can publish anything, signed by libp2p with its own key.
func ptRaw(t *testing.T, v *ptVictim, topic string, k crypto.PrivKey) (*Host, *pubsub.Topic) {
	t.Helper()
	a := ptHostKey(t, k, nil)
	tp, err := a.PubSub().Join(topic)
	if err != nil {
		t.Fatal(err)
	}
	ptConnect(t, a, v.h)
	ptWaitTopicPeer(t, tp, v.h.ID())
	return a, tp
}

func (v *ptVictim) waitRejected(t *testing.T, key string, n uint64) {
	t.Helper()
	ptEventually(t, 10*time.Second, "rejection "+key, func() bool { return v.o.Rejected()[key] >= n })
}

func TestExchangeHeadsAndHeartbeats(t *testing.T) {
	a, b, oa, ob, m := ptPair(t)
	if _, err := a.JoinOrg(ptOrg, m); !errors.Is(err, ErrOrgJoined) {
		t.Fatalf("second JoinOrg: %v", err)
	}
	type headsMsgT struct {
		from    peer.ID
		payload []byte
	}
	var mu sync.Mutex
	var headsA, headsB []headsMsgT
	oa.OnHeads(func(from peer.ID, p []byte) { mu.Lock(); headsA = append(headsA, headsMsgT{from, p}); mu.Unlock() })
	ob.OnHeads(func(from peer.ID, p []byte) { mu.Lock(); headsB = append(headsB, headsMsgT{from, p}); mu.Unlock() })
	recA, recB := &ptRecorder{}, &ptRecorder{}
	oa.OnHeartbeat(recA.add)
	ob.OnHeartbeat(recB.add)

	ptConnect(t, a, b)
	if got := a.Peers(); len(got) != 1 || got[0] != b.ID() {
		t.Fatalf("a.Peers = %v", got)
	}
	ptWaitTopicPeer(t, oa.ledgerTopic, b.ID())
	ptWaitTopicPeer(t, oa.hbTopic, b.ID())
	ptWaitTopicPeer(t, ob.hbTopic, a.ID())

	ctx := context.Background()
	// Heads: delivered to the other side only; an unchanged payload
	// published again is delivered again; a full-size payload fits.
	big := bytes.Repeat([]byte{7}, MaxPayloadSize)
	// One at a time: validation is parallel, and an announcement overtaken
	// by a newer one from the same sender is dropped as stale.
	for i, p := range [][]byte{[]byte("heads-1"), []byte("heads-1"), big} {
		if err := oa.PublishHeads(ctx, p); err != nil {
			t.Fatal(err)
		}
		ptEventually(t, 10*time.Second, "b gets heads", func() bool { mu.Lock(); defer mu.Unlock(); return len(headsB) == i+1 })
	}
	mu.Lock()
	if headsB[0].from != a.ID() || string(headsB[1].payload) != "heads-1" || !bytes.Equal(headsB[2].payload, big) {
		t.Fatalf("heads at b: from %s, %q", headsB[0].from, headsB[1].payload)
	}
	if len(headsA) != 0 {
		t.Fatalf("a got its own heads")
	}
	mu.Unlock()
	if err := oa.PublishHeads(ctx, make([]byte, MaxPayloadSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized PublishHeads: %v", err)
	}

	// Heartbeats: seen by the other side and by the sender itself.
	hb := Heartbeat{Interval: 30000, Free: Resources{Cores: 2000, Slots: 2}, Total: Resources{Cores: 4000, Slots: 4},
		Instances: []RunningInstance{{Job: "j1", Slot: 0, Kind: "primary", Item: 3, Instance: "i1", Started: 1}},
		Heads:     []string{"bafyx"}, PlanHash: "ph", Version: "test", Name: "alpha"}
	if err := oa.PublishHeartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	fromA := func(h Heartbeat) bool { return h.Machine == a.ID().String() }
	ptEventually(t, 10*time.Second, "b sees a's heartbeat", func() bool { return recB.has(fromA) })
	ptEventually(t, 10*time.Second, "a sees its own heartbeat", func() bool { return recA.has(fromA) })
	recB.mu.Lock()
	got := recB.hbs[0]
	recB.mu.Unlock()
	if got.Seq == 0 || got.Time == 0 || got.Name != "alpha" || len(got.Instances) != 1 || got.Instances[0].Item != 3 ||
		len(got.Addrs) == 0 || got.Verify(ptOrg) != nil {
		t.Fatalf("delivered heartbeat %+v", got)
	}
	// A second heartbeat has a larger Seq.
	if err := oa.PublishHeartbeat(ctx, hb); err != nil {
		t.Fatal(err)
	}
	ptEventually(t, 10*time.Second, "second heartbeat", func() bool { return recB.count(fromA) == 2 })
	recB.mu.Lock()
	if recB.hbs[1].Seq <= recB.hbs[0].Seq {
		t.Fatalf("seq not increasing: %d then %d", recB.hbs[0].Seq, recB.hbs[1].Seq)
	}
	recB.mu.Unlock()

	if err := ob.PublishHeartbeat(ctx, Heartbeat{Name: "beta"}); err != nil {
		t.Fatal(err)
	}
	ptEventually(t, 10*time.Second, "a sees b", func() bool {
		return recA.has(func(h Heartbeat) bool { return h.Machine == b.ID().String() })
	})
	if r := oa.Rejected(); len(r) != 0 {
		t.Fatalf("honest traffic rejected: %v", r)
	}
	if r := ob.Rejected(); len(r) != 0 {
		t.Fatalf("honest traffic rejected: %v", r)
	}
}

func TestPublishRequiresMembership(t *testing.T) {
	h := ptHost(t, nil)
	m := newPtMembers()
	o, err := h.JoinOrg(ptOrg, m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := o.PublishHeartbeat(ctx, Heartbeat{}); !errors.Is(err, ErrNotApproved) {
		t.Fatalf("heartbeat from non-member: %v", err)
	}
	if err := o.PublishHeads(ctx, []byte("x")); !errors.Is(err, ErrNotMachine) {
		t.Fatalf("heads from non-member: %v", err)
	}
	m.add(h.ID(), false)
	if err := o.PublishHeads(ctx, []byte("x")); err != nil {
		t.Fatalf("heads from pending machine: %v", err)
	}
	if err := o.PublishHeartbeat(ctx, Heartbeat{}); !errors.Is(err, ErrNotApproved) {
		t.Fatalf("heartbeat from pending machine: %v", err)
	}
	for _, bad := range []string{"", "a/b"} {
		if _, err := h.JoinOrg(bad, m); err == nil {
			t.Fatalf("JoinOrg(%q) accepted", bad)
		}
	}
}

func TestNonMemberRejected(t *testing.T) {
	v := newPtVictim(t)
	// x runs a proper Org, believing itself (and v) approved, but v does
	// not know it.
	x := ptHost(t, nil)
	ox, err := x.JoinOrg(ptOrg, newPtMembers(x.ID(), v.h.ID()))
	if err != nil {
		t.Fatal(err)
	}
	ptConnect(t, x, v.h)
	ptWaitTopicPeer(t, ox.hbTopic, v.h.ID())
	ptWaitTopicPeer(t, ox.ledgerTopic, v.h.ID())
	if err := ox.PublishHeartbeat(context.Background(), Heartbeat{Name: "intruder"}); err != nil {
		t.Fatal(err)
	}
	if err := ox.PublishHeads(context.Background(), []byte("heads")); err != nil {
		t.Fatal(err)
	}
	v.waitRejected(t, "heartbeat/not_approved", 1)
	v.waitRejected(t, "ledger/not_machine", 1)
	if got := ptCounter(t, v.reg, "heartbeat", "not_approved"); got != 1 {
		t.Fatalf("cshare_gossip_rejected_total{topic=heartbeat,reason=not_approved} = %v", got)
	}
	if got := ptCounter(t, v.reg, "ledger", "not_machine"); got != 1 {
		t.Fatalf("cshare_gossip_rejected_total{topic=ledger,reason=not_machine} = %v", got)
	}
	if v.rec.has(func(h Heartbeat) bool { return h.Machine == x.ID().String() }) {
		t.Fatal("non-member heartbeat delivered")
	}
	// Peer scoring punishes the sender.
	ptEventually(t, 10*time.Second, "negative score for the intruder", func() bool {
		s, ok := v.h.PeerScore(x.ID())
		return ok && s < 0
	})
}

func TestForgedHeartbeatsRejected(t *testing.T) {
	v := newPtVictim(t)
	other := ptKey(t)
	otherID, _ := peer.IDFromPrivateKey(other)
	v.m.add(otherID, true)

	cases := []forgery{
		{"bad_signature", func(self crypto.PrivKey) []byte {
			hb := ptSigned(t, ptOrg, self, 10)
			forged := ptSigned(t, ptOrg, other, 10)
			hb.Sig = forged.Sig // a signature by another key
			return ptEncode(t, hb)
		}},
		{"bad_signature", func(self crypto.PrivKey) []byte {
			hb := ptSigned(t, "another-org", self, 10) // signed for another org
			return ptEncode(t, hb)
		}},
		{"bad_signature", func(self crypto.PrivKey) []byte {
			// In the name of another machine, signed with our key.
			hb := ptSigned(t, ptOrg, self, 10)
			hb.Machine = otherID.String()
			if err := hb.Sign(ptOrg, self); err != nil {
				t.Fatal(err)
			}
			return ptEncode(t, hb)
		}},
		{"unsigned", func(self crypto.PrivKey) []byte {
			hb := ptSigned(t, ptOrg, self, 10)
			hb.Sig = nil
			return ptEncode(t, hb)
		}},
		{"undecodable", func(self crypto.PrivKey) []byte { return []byte("\xa1\x63foo\x01 not a heartbeat") }},
		{"undecodable", func(self crypto.PrivKey) []byte {
			// valid CBOR of the schema but not canonical (an int widened to 8 bytes)
			b := ptEncode(t, ptSigned(t, ptOrg, self, 10))
			i := bytes.Index(b, []byte("interval"))
			j := i + len("interval")
			out := append([]byte{}, b[:j]...)
			out = append(out, 0x1b, 0, 0, 0, 0, 0, 0, 0x75, 0x30)
			return append(out, b[j+3:]...)
		}},
	}
	v.publishForgeries(t, TopicHeartbeat(ptOrg), KindHeartbeat, cases)
	if n := v.rec.count(func(h Heartbeat) bool { return h.Machine != v.h.ID().String() }); n != 0 {
		t.Fatalf("%d forged heartbeats delivered", n)
	}
}

func TestReplayedHeartbeatRejected(t *testing.T) {
	v := newPtVictim(t)
	k := ptKey(t)
	id, _ := peer.IDFromPrivateKey(k)
	v.m.add(id, true)
	_, tp := ptRaw(t, v, TopicHeartbeat(ptOrg), k)
	ctx := context.Background()
	pub := func(hb Heartbeat) {
		t.Helper()
		if err := tp.Publish(ctx, ptEncode(t, hb)); err != nil {
			t.Fatal(err)
		}
	}
	mine := func(seq uint64) func(Heartbeat) bool {
		return func(h Heartbeat) bool { return h.Machine == id.String() && h.Seq == seq }
	}
	base := uint64(time.Now().UnixNano())
	pub(ptSigned(t, ptOrg, k, base))
	ptEventually(t, 10*time.Second, "first accepted", func() bool { return v.rec.has(mine(base)) })

	replay := ptSigned(t, ptOrg, k, base)
	replay.Time++ // same seq, different bytes (identical bytes are a duplicate ID and never reach validation)
	if err := replay.Sign(ptOrg, k); err != nil {
		t.Fatal(err)
	}
	pub(replay)
	v.waitRejected(t, "heartbeat/replay", 1)
	pub(ptSigned(t, ptOrg, k, base-uint64(time.Minute))) // an old one, out of sequence
	v.waitRejected(t, "heartbeat/replay", 2)
	// Slightly older than the last accepted: overtaken on the way; dropped
	// without penalty.
	pub(ptSigned(t, ptOrg, k, base-uint64(time.Millisecond)))
	ptEventually(t, 10*time.Second, "reordered ignored", func() bool { return v.o.Ignored()["heartbeat/reordered"] == 1 })
	pub(ptSigned(t, ptOrg, k, base+1))
	ptEventually(t, 10*time.Second, "next accepted", func() bool { return v.rec.has(mine(base + 1)) })
	if n := v.rec.count(func(h Heartbeat) bool { return h.Machine == id.String() }); n != 2 {
		t.Fatalf("%d heartbeats delivered, want 2", n)
	}
	if got := ptCounter(t, v.reg, "heartbeat", "replay"); got != 2 {
		t.Fatalf("replay counter = %v", got)
	}
}

func TestOversizedRejected(t *testing.T) {
	v := newPtVictim(t)
	k := ptKey(t)
	id, _ := peer.IDFromPrivateKey(k)
	v.m.add(id, true)
	_, hbTp := ptRaw(t, v, TopicHeartbeat(ptOrg), k)
	// Pad a real heartbeat past the cap (still under the wire limit).
	hb := ptSigned(t, ptOrg, k, 1)
	hb.Version = string(bytes.Repeat([]byte("x"), MaxPayloadSize))
	if err := hb.Sign(ptOrg, k); err != nil {
		t.Fatal(err)
	}
	if err := hbTp.Publish(context.Background(), ptEncode(t, hb)); err != nil {
		t.Fatal(err)
	}
	v.waitRejected(t, "heartbeat/too_large", 1)

	k2 := ptKey(t)
	id2, _ := peer.IDFromPrivateKey(k2)
	v.m.add(id2, true)
	_, ledTp := ptRaw(t, v, TopicLedger(ptOrg), k2)
	if err := ledTp.Publish(context.Background(), ptHeads(t, k2, headsMsg{Seq: 1, Payload: make([]byte, MaxPayloadSize+1)})); err != nil {
		t.Fatal(err)
	}
	v.waitRejected(t, "ledger/too_large", 1)
	if got := ptCounter(t, v.reg, "ledger", "too_large"); got != 1 {
		t.Fatalf("counter = %v", got)
	}
	if err := v.o.PublishHeartbeat(context.Background(), Heartbeat{Version: string(make([]byte, MaxPayloadSize))}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized PublishHeartbeat: %v", err)
	}
}

// ptHeads encodes m as sent by k: From set and signed for ptOrg.
func ptHeads(t testing.TB, k crypto.PrivKey, m headsMsg) []byte {
	t.Helper()
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	m.From = id.String()
	sb, err := m.signingBytes(ptOrg)
	if err != nil {
		t.Fatal(err)
	}
	if m.Sig, err = k.Sign(sb); err != nil {
		t.Fatal(err)
	}
	data, err := gossipEnc.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// forgery is a message a test publishes as sender self, expecting it to be
// rejected for reason.
type forgery struct {
	reason string
	data   func(self crypto.PrivKey) []byte
}

// publishForgeries publishes each forgery on topic from a fresh approved
// sender (so its score stays above graylist) and waits until the victim has
// rejected it for its reason and counted it.
func (v *ptVictim) publishForgeries(t *testing.T, topic, kind string, cases []forgery) {
	t.Helper()
	want := map[string]uint64{}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%s", i, c.reason), func(t *testing.T) {
			k := ptKey(t)
			id, _ := peer.IDFromPrivateKey(k)
			v.m.add(id, true)
			_, tp := ptRaw(t, v, topic, k)
			if err := tp.Publish(context.Background(), c.data(k)); err != nil {
				t.Fatal(err)
			}
			want[c.reason]++
			v.waitRejected(t, kind+"/"+c.reason, want[c.reason])
			if got := ptCounter(t, v.reg, kind, c.reason); got != float64(want[c.reason]) {
				t.Fatalf("counter %s = %v, want %d", c.reason, got, want[c.reason])
			}
		})
	}
}

// TestForgedHeadsRejected: a heads announcement must carry a valid signature
// by the machine it names; forged ones are rejected and never delivered.
func TestForgedHeadsRejected(t *testing.T) {
	v := newPtVictim(t)
	var mu sync.Mutex
	var got []string
	v.o.OnHeads(func(_ peer.ID, p []byte) { mu.Lock(); got = append(got, string(p)); mu.Unlock() })
	other := ptKey(t)
	otherID, _ := peer.IDFromPrivateKey(other)
	v.m.add(otherID, true)
	cases := []forgery{
		{"unsigned", func(self crypto.PrivKey) []byte {
			id, _ := peer.IDFromPrivateKey(self)
			b, _ := gossipEnc.Marshal(&headsMsg{Seq: 1, Payload: []byte("x"), From: id.String()})
			return b
		}},
		{"bad_signature", func(self crypto.PrivKey) []byte {
			var m headsMsg
			if err := gossipDec.Unmarshal(ptHeads(t, self, headsMsg{Seq: 1, Payload: []byte("x")}), &m); err != nil {
				t.Fatal(err)
			}
			m.Payload = []byte("y") // altered on the way
			b, _ := gossipEnc.Marshal(&m)
			return b
		}},
		{"bad_signature", func(self crypto.PrivKey) []byte {
			// In the name of another machine, signed with our key.
			m := headsMsg{Seq: 1, Payload: []byte("x"), From: otherID.String()}
			sb, _ := m.signingBytes(ptOrg)
			m.Sig, _ = self.Sign(sb)
			b, _ := gossipEnc.Marshal(&m)
			return b
		}},
		{"undecodable", func(self crypto.PrivKey) []byte {
			b, _ := gossipEnc.Marshal(&headsMsg{Seq: 1, Payload: []byte("x"), From: "not a peer ID", Sig: []byte{1}})
			return b
		}},
	}
	v.publishForgeries(t, TopicLedger(ptOrg), KindLedger, cases)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 0 {
		t.Fatalf("forged heads delivered: %q", got)
	}
}

func TestStaleHeadsIgnored(t *testing.T) {
	v := newPtVictim(t)
	var mu sync.Mutex
	var got []string
	v.o.OnHeads(func(_ peer.ID, p []byte) { mu.Lock(); got = append(got, string(p)); mu.Unlock() })
	k := ptKey(t)
	id, _ := peer.IDFromPrivateKey(k)
	v.m.add(id, false) // pending machines may announce heads
	_, tp := ptRaw(t, v, TopicLedger(ptOrg), k)
	for _, m := range []headsMsg{{Seq: 10, Payload: []byte("a")}, {Seq: 5, Payload: []byte("stale")}, {Seq: 11, Payload: []byte("b")}} {
		if err := tp.Publish(context.Background(), ptHeads(t, k, m)); err != nil {
			t.Fatal(err)
		}
	}
	// Validation runs in parallel, so arrival order is not guaranteed: 5 is
	// stale if it is validated after 10 or 11, and 10 if after 11. What
	// holds: b (the newest) is delivered, every message is either delivered
	// or ignored as stale, nothing is rejected.
	ptEventually(t, 10*time.Second, "all three handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return uint64(len(got))+v.o.Ignored()["ledger/stale"] == 3
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(got, "b") {
		t.Fatalf("heads delivered: %q", got)
	}
	if r := v.o.Rejected(); len(r) != 0 {
		t.Fatalf("rejected: %v", r)
	}
}

func TestFetchHeartbeatsAndBeatOnJoin(t *testing.T) {
	a, b, n := ptHost(t, nil), ptHost(t, nil), ptHost(t, nil)
	m := newPtMembers(a.ID(), b.ID(), n.ID())
	oa, _ := a.JoinOrg(ptOrg, m)
	ob, _ := b.JoinOrg(ptOrg, m)
	on, err := n.JoinOrg(ptOrg, m)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ptConnect(t, a, b)
	ptWaitTopicPeer(t, oa.hbTopic, b.ID())
	ptWaitTopicPeer(t, ob.hbTopic, a.ID())
	recA := &ptRecorder{}
	oa.OnHeartbeat(recA.add)
	if err := ob.PublishHeartbeat(ctx, Heartbeat{Name: "b", Interval: 30000}); err != nil {
		t.Fatal(err)
	}
	if err := oa.PublishHeartbeat(ctx, Heartbeat{Name: "a", Interval: 30000}); err != nil {
		t.Fatal(err)
	}
	ptEventually(t, 10*time.Second, "a knows b", func() bool { return recA.count(func(Heartbeat) bool { return true }) == 2 })

	// a beats when a peer joins its heartbeat topic.
	var beats sync.Mutex
	nBeats := 0
	oa.SetBeat(func() {
		beats.Lock()
		nBeats++
		beats.Unlock()
		if err := oa.PublishHeartbeat(ctx, Heartbeat{Name: "a", Interval: 30000}); err != nil {
			t.Errorf("beat: %v", err)
		}
	})
	recN := &ptRecorder{}
	on.OnHeartbeat(recN.add)
	start := time.Now()
	ptConnect(t, n, a) // n never talks to b
	ptEventually(t, 10*time.Second, "n gets a's prompt heartbeat", func() bool {
		return recN.has(func(h Heartbeat) bool { return h.Machine == a.ID().String() })
	})
	t.Logf("first heartbeat from a %v after connecting", time.Since(start))

	seen, err := on.FetchSeen(ctx, a.ID())
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0].Heartbeat.Machine > seen[1].Heartbeat.Machine {
		t.Fatalf("fetched %d heartbeats", len(seen))
	}
	var names []string
	for _, s := range seen {
		names = append(names, s.Heartbeat.Name)
		if s.At.After(time.Now()) || s.Heartbeat.Verify(ptOrg) != nil {
			t.Fatalf("bad fetched heartbeat %+v", s)
		}
	}
	if !(names[0] == "a" && names[1] == "b" || names[0] == "b" && names[1] == "a") {
		t.Fatalf("fetched %v", names)
	}
	hbs, err := on.FetchHeartbeats(ctx, a.ID())
	if err != nil || len(hbs) != 2 {
		t.Fatalf("FetchHeartbeats: %d, %v", len(hbs), err)
	}
	var l Liveness
	for _, s := range seen {
		l.Observe(s.Heartbeat, s.At)
	}
	if !l.Online(b.ID(), time.Now(), 0) {
		t.Fatal("b not online after fetch")
	}
	// n now answers for b too, from its cache.
	ptConnect(t, b, n)
	fromN, err := ob.FetchHeartbeats(ctx, n.ID())
	if err != nil || len(fromN) < 2 {
		t.Fatalf("fetch from n: %d, %v", len(fromN), err)
	}

	// A peer that is not a machine of the org is refused.
	x := ptHost(t, nil)
	ox, _ := x.JoinOrg(ptOrg, newPtMembers(x.ID()))
	ptConnect(t, x, a)
	if _, err := ox.FetchHeartbeats(ctx, a.ID()); err == nil {
		t.Fatal("non-member fetched heartbeats")
	}
	beats.Lock()
	defer beats.Unlock()
	if nBeats == 0 {
		t.Fatal("beat never called")
	}
}

func TestBeatDebounced(t *testing.T) {
	h := ptHost(t, nil)
	o, err := h.JoinOrg(ptOrg, newPtMembers(h.ID()))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var at []time.Time
	o.SetBeat(func() { mu.Lock(); at = append(at, time.Now()); mu.Unlock() })
	for i := 0; i < 20; i++ {
		o.kickBeat()
	}
	ptEventually(t, 5*time.Second, "first beat", func() bool { mu.Lock(); defer mu.Unlock(); return len(at) == 1 })
	for i := 0; i < 20; i++ {
		o.kickBeat()
	}
	ptEventually(t, 5*time.Second, "second beat", func() bool { mu.Lock(); defer mu.Unlock(); return len(at) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if gap := at[1].Sub(at[0]); gap < BeatMinGap-10*time.Millisecond {
		t.Fatalf("beats %v apart, want >= %v", gap, BeatMinGap)
	}
}

func TestHostAddrsAndConnect(t *testing.T) {
	h, err := New(context.Background(), Config{Key: ptKey(t), ListenAddrs: []string{"/ip4/0.0.0.0/tcp/0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	addrs := h.Addrs()
	suffix := "/p2p/" + h.ID().String()
	loop := false
	for _, a := range addrs {
		if !bytes.HasSuffix([]byte(a), []byte(suffix)) || bytes.Contains([]byte(a), []byte("0.0.0.0")) {
			t.Fatalf("bad addr %q", a)
		}
		if bytes.HasPrefix([]byte(a), []byte("/ip4/127.0.0.1/tcp/")) {
			loop = true
		}
	}
	if !loop {
		t.Fatalf("no loopback addr in %v", addrs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Connect(ctx, nil); err == nil {
		t.Fatal("Connect(nil) succeeded")
	}
	if err := h.Connect(ctx, []string{"/ip4/127.0.0.1/tcp/1"}); err == nil {
		t.Fatal("Connect without /p2p succeeded")
	}
	other := ptHost(t, nil)
	dead := "/ip4/127.0.0.1/tcp/1/p2p/" + ptHost(t, nil).ID().String()
	if err := h.Connect(ctx, append([]string{dead, "garbage"}, other.Addrs()...)); err != nil {
		t.Fatalf("Connect with one good peer: %v", err)
	}
	if ps := h.Peers(); len(ps) != 1 || ps[0] != other.ID() {
		t.Fatalf("peers %v", ps)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMetricsSharedRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := ptHost(t, reg)
	b := ptHost(t, reg) // a second host on the same registry must not fail
	if a.rejected != b.rejected {
		t.Fatal("second host did not reuse the registered counter")
	}
}

func TestQUICConnect(t *testing.T) {
	mk := func() *Host {
		h, err := New(context.Background(), Config{Key: ptKey(t), ListenAddrs: []string{"/ip4/127.0.0.1/udp/0/quic-v1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		return h
	}
	a, b := mk(), mk()
	ptConnect(t, a, b)
	conns := a.LibP2P().Network().ConnsToPeer(b.ID())
	if len(conns) == 0 || conns[0].ConnState().Transport != "quic-v1" {
		t.Fatalf("conns %v", conns)
	}
}

func TestOrgCloseAndRejoin(t *testing.T) {
	h := ptHost(t, nil)
	m := newPtMembers(h.ID())
	o, err := h.JoinOrg(ptOrg, m)
	if err != nil {
		t.Fatal(err)
	}
	o.SetBeat(func() {})
	o.Close()
	o.Close() // idempotent
	if err := o.PublishHeartbeat(context.Background(), Heartbeat{}); err == nil {
		t.Fatal("publish on a closed org succeeded")
	}
	o2, err := h.JoinOrg(ptOrg, m)
	if err != nil {
		t.Fatalf("rejoin: %v", err)
	}
	rec := &ptRecorder{}
	o2.OnHeartbeat(rec.add)
	if err := o2.PublishHeartbeat(context.Background(), Heartbeat{}); err != nil {
		t.Fatal(err)
	}
	ptEventually(t, 5*time.Second, "own heartbeat after rejoin", func() bool { return rec.count(func(Heartbeat) bool { return true }) == 1 })
	h.Close()
	if _, err := h.JoinOrg("other", m); !errors.Is(err, ErrClosed) {
		t.Fatalf("JoinOrg after Close: %v", err)
	}
}

// FuzzValidateHeads: the ledger-topic validator never panics, and accepts
// only a message signed by a machine of the org, handing on that machine
// as the sender.
func FuzzValidateHeads(f *testing.F) {
	h := ptHost(f, nil)
	k := ptKey(f)
	id, _ := peer.IDFromPrivateKey(k)
	m := newPtMembers(h.ID())
	m.add(id, true)
	o, err := h.JoinOrg(ptOrg, m)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ptHeads(f, k, headsMsg{Seq: 1, Payload: []byte("heads")}))
	f.Add(ptHeads(f, ptKey(f), headsMsg{Seq: 2, Payload: []byte("stranger")}))
	f.Add([]byte{0xa0})
	f.Add([]byte{})
	other := ptKey(f)
	otherID, _ := peer.IDFromPrivateKey(other)
	f.Fuzz(func(t *testing.T, data []byte) {
		msg := &pubsub.Message{Message: &pb.Message{Data: data}}
		if o.validateHeads(context.Background(), otherID, msg) != pubsub.ValidationAccept {
			return
		}
		d, ok := msg.ValidatorData.(headsDelivery)
		if !ok || d.from != id {
			t.Fatalf("accepted a message from %v", d.from)
		}
	})
}
