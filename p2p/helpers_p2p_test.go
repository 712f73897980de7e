package p2p

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"
)

// Test helpers of the host/org tests. Names carry a "pt" prefix so they do
// not collide with the sync tests' helpers in the same package.

const ptOrg = "bafyorgtest"

// ptMembers is a Membership backed by two sets.
type ptMembers struct {
	mu       sync.RWMutex
	machines map[peer.ID]bool
	approved map[peer.ID]bool
}

func newPtMembers(approved ...peer.ID) *ptMembers {
	m := &ptMembers{machines: map[peer.ID]bool{}, approved: map[peer.ID]bool{}}
	for _, id := range approved {
		m.add(id, true)
	}
	return m
}

func (m *ptMembers) add(id peer.ID, approved bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.machines[id] = true
	if approved {
		m.approved[id] = true
	}
}

func (m *ptMembers) remove(id peer.ID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.machines, id)
	delete(m.approved, id)
}

func (m *ptMembers) IsMachine(id peer.ID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.machines[id]
}

func (m *ptMembers) IsApproved(id peer.ID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.approved[id]
}

func ptKey(t testing.TB) crypto.PrivKey {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ptHost(t testing.TB, reg prometheus.Registerer) *Host {
	t.Helper()
	return ptHostKey(t, ptKey(t), reg)
}

func ptHostKey(t testing.TB, k crypto.PrivKey, reg prometheus.Registerer) *Host {
	t.Helper()
	return ptHostCfg(t, Config{Key: k, Metrics: reg})
}

// ptHostCfg starts a host on loopback with cfg (its key made if missing).
func ptHostCfg(t testing.TB, cfg Config) *Host {
	t.Helper()
	if cfg.Key == nil {
		cfg.Key = ptKey(t)
	}
	cfg.ListenAddrs = []string{"/ip4/127.0.0.1/tcp/0"}
	h, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// ptPair starts two hosts, machines of one org, and joins it on both.
func ptPair(t testing.TB) (a, b *Host, oa, ob *Org, m *ptMembers) {
	t.Helper()
	return ptPairCfg(t, Config{}, Config{})
}

// ptPairCfg is ptPair with each host's config.
func ptPairCfg(t testing.TB, ca, cb Config) (a, b *Host, oa, ob *Org, m *ptMembers) {
	t.Helper()
	a, b = ptHostCfg(t, ca), ptHostCfg(t, cb)
	m = newPtMembers(a.ID(), b.ID())
	var err error
	if oa, err = a.JoinOrg(ptOrg, m); err != nil {
		t.Fatal(err)
	}
	if ob, err = b.JoinOrg(ptOrg, m); err != nil {
		t.Fatal(err)
	}
	return a, b, oa, ob, m
}

func ptConnect(t testing.TB, a, b *Host) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Connect(ctx, b.Addrs()); err != nil {
		t.Fatal(err)
	}
}

// ptEventually polls cond until it holds or the deadline passes.
func ptEventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ptWaitTopicPeer(t testing.TB, tp *pubsub.Topic, id peer.ID) {
	t.Helper()
	ptEventually(t, 10*time.Second, "topic peer "+id.ShortString()+" on "+tp.String(), func() bool {
		return slices.Contains(tp.ListPeers(), id)
	})
}

// ptSigned builds a heartbeat of key's machine, signed for org.
func ptSigned(t testing.TB, org string, k crypto.PrivKey, seq uint64) Heartbeat {
	t.Helper()
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	hb := Heartbeat{
		Machine: id.String(), Seq: seq, Time: time.Now().UnixMilli(), Interval: 30000,
		Free:  Resources{Cores: 4000, MemoryMB: 8192, Slots: 4},
		Total: Resources{Cores: 8000, MemoryMB: 16384, Slots: 8},
		Heads: []string{"bafyhead"}, Name: "m-" + id.ShortString(),
	}
	if err := hb.Sign(org, k); err != nil {
		t.Fatal(err)
	}
	return hb
}

func ptEncode(t testing.TB, hb Heartbeat) []byte {
	t.Helper()
	b, err := EncodeHeartbeat(&hb)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ptCounter reads cshare_gossip_rejected_total{topic,reason} from reg.
func ptCounter(t testing.TB, reg *prometheus.Registry, topic, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "cshare_gossip_rejected_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["topic"] == topic && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// ptRecorder collects delivered heartbeats.
type ptRecorder struct {
	mu  sync.Mutex
	hbs []Heartbeat
}

func (r *ptRecorder) add(hb Heartbeat) {
	r.mu.Lock()
	r.hbs = append(r.hbs, hb)
	r.mu.Unlock()
}

func (r *ptRecorder) has(f func(Heartbeat) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.hbs, f)
}

func (r *ptRecorder) count(f func(Heartbeat) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, hb := range r.hbs {
		if f(hb) {
			n++
		}
	}
	return n
}
