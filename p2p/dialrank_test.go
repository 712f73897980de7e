package p2p

import (
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

// TestTCPFirst: TCP addresses are dialed at once, QUIC ones only after the
// fallback delay; every address is kept.
func TestTCPFirst(t *testing.T) {
	addrs := []ma.Multiaddr{
		ma.StringCast("/ip4/10.0.0.2/udp/4001/quic-v1"),
		ma.StringCast("/ip4/10.0.0.2/tcp/4001"),
		ma.StringCast("/ip6/::1/udp/4001/quic-v1"),
		ma.StringCast("/ip6/::1/tcp/4001"),
	}
	got := TCPFirst(addrs)
	if len(got) != len(addrs) {
		t.Fatalf("%d ranked of %d addresses", len(got), len(addrs))
	}
	for _, d := range got {
		_, err := d.Addr.ValueForProtocol(ma.P_TCP)
		if tcp := err == nil; tcp && d.Delay != 0 {
			t.Errorf("%s delayed %v, want at once", d.Addr, d.Delay)
		} else if !tcp && d.Delay < quicFallback {
			t.Errorf("%s delayed %v, want at least %v", d.Addr, d.Delay, quicFallback)
		}
	}
}
