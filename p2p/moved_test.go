package p2p

import (
	"testing"

	ma "github.com/multiformats/go-multiaddr"
)

// A connection is gone from a moved machine only when its local IP is not
// one of the machine's interfaces any more; relayed, unspecified and
// IP-less local addresses never are.
func TestGoneAfterMove(t *testing.T) {
	have := interfaceIPs([]ma.Multiaddr{ma.StringCast("/ip4/127.0.0.1"), ma.StringCast("/ip4/192.168.72.2"), ma.StringCast("/ip6/::1")})
	for _, c := range []struct {
		local string
		want  bool
	}{
		{"/ip4/192.168.61.2/tcp/4001", true}, // the address it had before it moved
		{"/ip4/192.168.72.2/tcp/4001", false},
		{"/ip4/127.0.0.1/tcp/50000", false},
		{"/ip6/::1/tcp/4001", false},
		{"/ip6/fe80::1/tcp/4001", true},
		{"/ip4/0.0.0.0/udp/4001/quic-v1", false},
		{"/ip4/11.77.0.1/tcp/4001/p2p/12D3KooWB4g7KaAbgdtHTA3bsePj5YeatnJz4uoVzpzvzoY6Qm4m/p2p-circuit", false},
		{"/dns4/relay.example.com/tcp/4001", false},
	} {
		if got := gone(ma.StringCast(c.local), have); got != c.want {
			t.Errorf("gone(%s) = %v, want %v", c.local, got, c.want)
		}
	}
	if gone(nil, have) {
		t.Error("gone(nil) = true")
	}
}
