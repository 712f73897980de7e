package p2p

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/client"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
)

// natCounter reads counter or gauge name{label=value} from reg (0 if
// absent); label "" reads an unlabelled gauge.
func natCounter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" {
				return m.GetGauge().GetValue()
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// circuitTo is target's address through relay r.
func circuitTo(t *testing.T, r *Host, target peer.ID) ma.Multiaddr {
	t.Helper()
	a, err := ma.NewMultiaddr(r.ListenAddrs()[0] + "/p2p/" + r.ID().String() + "/p2p-circuit/p2p/" + target.String())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// stranger is a plain libp2p host with the relay transport and none of
// cshare's gate: it tries what an outsider would.
func stranger(t *testing.T) host.Host {
	t.Helper()
	s, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.EnableRelay(), libp2p.DisableMetrics())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestRelayForOrgOnly: a machine serving as a relay gives approved machines
// of its org a reservation and relays between them; a stranger gets no
// reservation and no relayed connection to a machine that has one, and a
// machine does not dial through a relay outside its org.
func TestRelayForOrgOnly(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := ptHostCfg(t, Config{Relay: RelayOn, Metrics: reg})
	a, b := ptHost(t, nil), ptHost(t, nil)
	m := newPtMembers(r.ID(), a.ID(), b.ID())
	for _, h := range []*Host{r, a, b} {
		if _, err := h.JoinOrg(ptOrg, m); err != nil {
			t.Fatal(err)
		}
	}
	ptEventually(t, 10*time.Second, "the relay service", r.RelayServing)
	ptConnect(t, a, r)
	ptConnect(t, b, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rinfo := peer.AddrInfo{ID: r.ID(), Addrs: r.LibP2P().Addrs()}
	if _, err := client.Reserve(ctx, a.LibP2P(), rinfo); err != nil {
		t.Fatalf("an approved machine's reservation: %v", err)
	}
	// b reaches a through r: relayed, and usable for streams.
	if err := b.LibP2P().Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: []ma.Multiaddr{circuitTo(t, r, a.ID())}}); err != nil {
		t.Fatalf("b through the relay to a: %v", err)
	}
	if got := b.Path(a.ID()); got != PathRelayed {
		t.Fatalf("b's path to a = %q, want %q", got, PathRelayed)
	}
	var conn Connection
	for _, c := range b.Connections() {
		if c.Machine == a.ID().String() {
			conn = c
		}
	}
	if conn.Path != PathRelayed || !strings.Contains(conn.Addr, "/p2p-circuit") {
		t.Fatalf("b's connection to a = %+v, want relayed through a /p2p-circuit address", conn)
	}

	s := stranger(t)
	if err := s.Connect(ctx, rinfo); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Reserve(ctx, s, rinfo); err == nil {
		t.Fatal("a stranger got a reservation from the org's relay")
	}
	sctx := network.WithAllowLimitedConn(ctx, "test")
	if err := s.Connect(sctx, peer.AddrInfo{ID: a.ID(), Addrs: []ma.Multiaddr{circuitTo(t, r, a.ID())}}); err == nil {
		t.Fatal("a stranger reached a machine through the org's relay")
	}
	if got := natCounter(t, reg, "cshare_p2p_refused_total", "what", "stream "+hopProtocol); got < 2 {
		t.Fatalf("refused relay streams counted: %v, want at least 2", got)
	}
	ptEventually(t, 10*time.Second, "an accepted reservation counted", func() bool {
		return natCounter(t, reg, "cshare_relay_reservations_total", "result", "accepted") >= 1 &&
			natCounter(t, reg, "cshare_relay_reservations", "", "") == 1
	})

	// A relay that is no machine of the org is not used, even when asked.
	other := ptHostCfg(t, Config{Relay: RelayOn})
	ptConnect(t, b, other)
	if err := b.LibP2P().Connect(ctx, peer.AddrInfo{ID: s.ID(), Addrs: []ma.Multiaddr{circuitTo(t, other, s.ID())}}); err == nil {
		t.Fatal("b dialled through a relay outside its org")
	}
}

// TestRelayOutsideOrgRefusesAll: a relay whose host is in no org holds
// nothing to serve: its ACL refuses every reservation (counted).
func TestRelayOutsideOrgRefusesAll(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := ptHostCfg(t, Config{Relay: RelayOn, Metrics: reg})
	ptEventually(t, 10*time.Second, "the relay service", r.RelayServing)
	s := stranger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rinfo := peer.AddrInfo{ID: r.ID(), Addrs: r.LibP2P().Addrs()}
	if err := s.Connect(ctx, rinfo); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Reserve(ctx, s, rinfo); err == nil {
		t.Fatal("a relay in no org gave a reservation")
	}
	// The relay counts a request after it has answered it.
	ptEventually(t, 10*time.Second, "one refused reservation counted", func() bool {
		return natCounter(t, reg, "cshare_relay_reservations_total", "result", "refused") == 1
	})
}

// TestRelayedGivesWayToDirect: once a machine reached through a relay is
// also connected directly, its relayed connection is closed (only gossip
// ran on it), and gossip goes on over the direct one.
func TestRelayedGivesWayToDirect(t *testing.T) {
	old := pathTick
	pathTick = 50 * time.Millisecond
	defer func() { pathTick = old }()
	r := ptHostCfg(t, Config{Relay: RelayOn})
	a, b := ptHost(t, nil), ptHost(t, nil)
	m := newPtMembers(r.ID(), a.ID(), b.ID())
	var ob *Org
	for _, h := range []*Host{r, a, b} {
		o, err := h.JoinOrg(ptOrg, m)
		if err != nil {
			t.Fatal(err)
		}
		if h == b {
			ob = o
		}
	}
	ptEventually(t, 10*time.Second, "the relay service", r.RelayServing)
	ptConnect(t, a, r)
	ptConnect(t, b, r)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := client.Reserve(ctx, a.LibP2P(), peer.AddrInfo{ID: r.ID(), Addrs: r.LibP2P().Addrs()}); err != nil {
		t.Fatal(err)
	}
	if err := b.LibP2P().Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: []ma.Multiaddr{circuitTo(t, r, a.ID())}}); err != nil {
		t.Fatal(err)
	}
	if b.Path(a.ID()) != PathRelayed {
		t.Fatal("not relayed")
	}
	if err := b.DialPeer(network.WithForceDirectDial(ctx, "test"), a.ID(), a.Addrs()); err != nil {
		t.Fatal(err)
	}
	relayed := func() int {
		n := 0
		for _, c := range b.LibP2P().Network().ConnsToPeer(a.ID()) {
			if isRelayAddr(c.RemoteMultiaddr()) {
				n++
			}
		}
		return n
	}
	ptEventually(t, 10*time.Second, "the relayed connection closed", func() bool { return relayed() == 0 && b.Path(a.ID()) == PathDirect })
	rec := &ptRecorder{}
	ob.OnHeartbeat(rec.add)
	oa := a.org(ptOrg)
	ptEventually(t, 10*time.Second, "a heartbeat over the direct path", func() bool {
		_ = oa.PublishHeartbeat(ctx, Heartbeat{Interval: 1000, Name: "a"})
		return rec.has(func(hb Heartbeat) bool { return hb.Machine == a.ID().String() })
	})
}

// TestHeartbeatRelayField: the relay flag round-trips and, false, leaves
// the heartbeat's encoding as it was before the field existed.
func TestHeartbeatRelayField(t *testing.T) {
	k := ptKey(t)
	hb := ptSigned(t, ptOrg, k, 1)
	plain := ptEncode(t, hb)
	if bytes.Contains(plain, []byte("relay")) {
		t.Fatal("a heartbeat that does not relay names the field")
	}
	hb.Relay = true
	if err := hb.Sign(ptOrg, k); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeVerifyHeartbeat(ptOrg, ptEncode(t, hb))
	if err != nil || !got.Relay {
		t.Fatalf("decode: %+v, %v", got.Relay, err)
	}
}

// TestRelayOf names the relay of circuit addresses and nothing else.
func TestRelayOf(t *testing.T) {
	r, _ := peer.Decode("12D3KooWGRUVh7fV7F5UqiEZZDYpkPTXQmjWfEmSxUGLhLhqQ7Jx")
	d, _ := peer.Decode("12D3KooWJWoaqZhDaoEFshF7Rh1bpY9ohihFhzcW6d69Lr2NASuq")
	for _, c := range []struct {
		addr string
		want peer.ID
	}{
		{"/ip4/1.2.3.4/tcp/4001/p2p/" + r.String() + "/p2p-circuit", r},
		{"/ip4/1.2.3.4/tcp/4001/p2p/" + r.String() + "/p2p-circuit/p2p/" + d.String(), r},
		{"/dns4/relay.example.com/udp/4001/quic-v1/p2p/" + r.String() + "/p2p-circuit", r},
		{"/ip4/1.2.3.4/tcp/4001/p2p/" + r.String(), ""},
		{"/ip4/1.2.3.4/tcp/4001", ""},
		{"/p2p-circuit", ""},
	} {
		a := ma.StringCast(c.addr)
		got, ok := relayOf(a)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("relayOf(%s) = %s, %v; want %s", c.addr, got, ok, c.want)
		}
	}
}

// TestGaterRefusesRelaysOutsideOrg: a dial through a relay is allowed only
// through an approved machine of the org the host has joined.
func TestGaterRefusesRelaysOutsideOrg(t *testing.T) {
	h := ptHost(t, nil)
	in, out := ptKey(t), ptKey(t)
	inID, _ := peer.IDFromPrivateKey(in)
	outID, _ := peer.IDFromPrivateKey(out)
	via := func(r peer.ID) ma.Multiaddr {
		return ma.StringCast("/ip4/1.2.3.4/tcp/4001/p2p/" + r.String() + "/p2p-circuit")
	}
	direct := ma.StringCast("/ip4/1.2.3.4/tcp/4001")
	g := h.Gate()
	if g.InterceptAddrDial(outID, via(inID)) {
		t.Fatal("a host in no org dials through a relay")
	}
	if _, err := h.JoinOrg(ptOrg, newPtMembers(h.ID(), inID)); err != nil {
		t.Fatal(err)
	}
	if !g.InterceptAddrDial(outID, via(inID)) || !g.InterceptAddrDial(outID, direct) {
		t.Fatal("refused a dial through the org's relay, or a direct one")
	}
	if g.InterceptAddrDial(inID, via(outID)) {
		t.Fatal("dials through a relay outside the org")
	}
}
