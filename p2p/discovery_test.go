package p2p

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
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
