package p2p

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	noise "github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
)

// TestMDNSService: one name per org, not showing the org ID, within DNS-SD's
// 15-character service label.
func TestMDNSService(t *testing.T) {
	a, b := MDNSService("bafyorgA"), MDNSService("bafyorgB")
	if a == b || a != MDNSService("bafyorgA") {
		t.Fatalf("names %q %q", a, b)
	}
	label := strings.TrimSuffix(strings.TrimPrefix(a, "_"), "._udp")
	if !strings.HasPrefix(a, "_cshare-") || !strings.HasSuffix(a, "._udp") || len(label) > 15 || strings.Contains(a, "bafyorgA") {
		t.Fatalf("name %q (label %q)", a, label)
	}
}

// TestKeepAddrs: a stream to a machine this host has no connection to and
// no address of fails with "no addresses"; after KeepAddrs with the
// machine's addresses (as the address book has them) it dials them.
func TestKeepAddrs(t *testing.T) {
	a, b := ptHost(t, nil), ptHost(t, nil)
	const proto = "/cshare/test-keepaddrs/1.0.0"
	b.LibP2P().SetStreamHandler(proto, func(s network.Stream) { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if s, err := a.LibP2P().NewStream(ctx, b.ID(), proto); err == nil || !strings.Contains(err.Error(), "no addresses") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("a stream with no address known: %v; want no addresses", err)
	}
	a.KeepAddrs(b.ID(), append(b.ListenAddrs(), "/ip4/0.0.0.0/tcp/1", "not an address"))
	s, err := a.LibP2P().NewStream(ctx, b.ID(), proto)
	if err != nil {
		t.Fatalf("after KeepAddrs: %v", err)
	}
	s.Close()
}

// TestSecurityTLSThenNoise: two nodes secure their connection with TLS; a
// peer offering Noise alone (a node of an earlier version) still connects,
// in either direction.
func TestSecurityTLSThenNoise(t *testing.T) {
	a, b := ptHost(t, nil), ptHost(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.DialPeer(ctx, b.ID(), b.ListenAddrs()); err != nil {
		t.Fatal(err)
	}
	conns := a.LibP2P().Network().ConnsToPeer(b.ID())
	if len(conns) == 0 {
		t.Fatal("no connection after the dial")
	}
	for _, c := range conns {
		if got := c.ConnState().Security; got != libp2ptls.ID {
			t.Fatalf("two nodes: security %q; want %q", got, libp2ptls.ID)
		}
	}
	old, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.Security(noise.ID, noise.New), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.Connect(ctx, peer.AddrInfo{ID: a.ID(), Addrs: a.LibP2P().Addrs()}); err != nil {
		t.Fatalf("a Noise-only peer dialling: %v", err)
	}
	if err := b.DialPeer(ctx, old.ID(), []string{old.Addrs()[0].String()}); err != nil {
		t.Fatalf("dialling a Noise-only peer: %v", err)
	}
	conns = b.LibP2P().Network().ConnsToPeer(old.ID())
	if len(conns) == 0 {
		t.Fatal("no connection to the Noise-only peer after the dial")
	}
	for _, c := range conns {
		if got := c.ConnState().Security; got != noise.ID {
			t.Fatalf("with a Noise-only peer: security %q; want %q", got, noise.ID)
		}
	}
}
