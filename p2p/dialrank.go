package p2p

import (
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
)

// quicFallback is how long a dial waits for a peer's TCP addresses before
// it tries the others (QUIC).
const quicFallback = 500 * time.Millisecond

// TCPFirst (the hosts' dial ranker) ranks a peer's TCP addresses first (at once) and the others
// quicFallback later, so machines connect over TCP (Noise, yamux) when they
// can: bulk dataset transfer there costs about half the CPU of QUIC and ran
// 2 to 3 times as fast on loopback (dataset.BenchmarkDatasetTransfer); QUIC
// stays the fallback for a peer TCP does not reach.
func TCPFirst(addrs []ma.Multiaddr) []network.AddrDelay {
	out := swarm.DefaultDialRanker(addrs)
	for i := range out {
		if isRelayAddr(out[i].Addr) {
			continue // after the direct ones, as libp2p ranks them
		}
		if _, err := out[i].Addr.ValueForProtocol(ma.P_TCP); err == nil {
			out[i].Delay = 0
		} else {
			out[i].Delay += quicFallback
		}
	}
	return out
}
