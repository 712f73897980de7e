package p2p

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/p2p/protocol/ping"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	msmux "github.com/multiformats/go-multistream"
)

// A machine whose address changes (a laptop carried to another network,
// a DHCP lease renewed with another address) keeps its process and its
// sockets: the direct connections it opened from its old address hang
// until their keepalives time out, tens of seconds in which neither side
// redials and the org cannot reach it. dropMoved closes them as soon as
// the address is gone, so the redial loops reconnect at once from where
// the machine is now (to public machines directly, and from them through
// the org's relays).

// movedEvery is how often the host looks at its interface addresses.
const movedEvery = 2 * time.Second

// dropMoved closes every direct connection whose local address is no
// longer an address of this host's interfaces.
func (h *Host) dropMoved(now time.Time) {
	if now.Sub(h.nat.movedAt) < movedEvery {
		return
	}
	h.nat.movedAt = now
	ifaddrs, err := manet.InterfaceMultiaddrs()
	if err != nil {
		return
	}
	have := interfaceIPs(ifaddrs)
	closed := 0
	for _, c := range h.h.Network().Conns() {
		if gone(c.LocalMultiaddr(), have) {
			_ = c.Close()
			closed++
		}
	}
	if closed > 0 {
		h.log.Info("this machine's address changed: closed the connections made from its old address, reconnecting from the new one", "connections", closed)
	}
}

// interfaceIPs is the set of the IP addresses among addrs.
func interfaceIPs(addrs []ma.Multiaddr) map[string]bool {
	have := map[string]bool{}
	for _, a := range addrs {
		if ip, err := manet.ToIP(a); err == nil {
			have[ip.String()] = true
		}
	}
	return have
}

// gone says whether local, a connection's local address, is an IP address
// not in have. A relayed connection's (a /p2p-circuit address), an
// unspecified one (a QUIC listener's on 0.0.0.0) and one with no IP are
// never gone: they say nothing of this host's interfaces.
func gone(local ma.Multiaddr, have map[string]bool) bool {
	if local == nil || isRelayAddr(local) {
		return false
	}
	ip, err := manet.ToIP(local)
	if err != nil || ip.IsUnspecified() {
		return false
	}
	return !have[ip.String()]
}

// The far side of a move: a peer that moved connects again from its new
// address while this host still holds its old connection, dead, whose
// streams (GossipSub's among them) stay open on it until its keepalive
// times out, and the peer's heartbeats do not arrive meanwhile. So a new
// direct connection from an IP address none of the peer's other direct
// connections has makes the host ping those others, each over its own
// connection, and close the ones that do not answer within probeTimeout.

const probeTimeout = 5 * time.Second

// probeOlder pings peer p's other direct connections when c, just made,
// comes from an IP address they do not, and closes those that do not
// answer.
func (h *Host) probeOlder(c network.Conn) {
	if isRelayAddr(c.RemoteMultiaddr()) {
		return
	}
	ip, err := manet.ToIP(c.RemoteMultiaddr())
	if err != nil {
		return
	}
	var older []network.Conn
	for _, o := range h.h.Network().ConnsToPeer(c.RemotePeer()) {
		if o == c || isRelayAddr(o.RemoteMultiaddr()) {
			continue
		}
		oip, err := manet.ToIP(o.RemoteMultiaddr())
		if err != nil {
			continue
		}
		if oip.Equal(ip) {
			return // not a new address
		}
		older = append(older, o)
	}
	for _, o := range older {
		ctx, cancel := context.WithTimeout(h.ctx, probeTimeout)
		err := pingConn(ctx, o)
		cancel()
		if err != nil && h.ctx.Err() == nil {
			h.log.Info("a machine connected from a new address and its old connection does not answer: closing it", "machine", c.RemotePeer().String(), "old", o.RemoteMultiaddr().String(), "err", err)
			_ = o.Close()
		}
	}
}

// pingConn pings the peer over connection c itself (libp2p's ping
// protocol, which every host serves).
func pingConn(ctx context.Context, c network.Conn) error {
	s, err := c.NewStream(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = s.Reset() }()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	if err := msmux.SelectProtoOrFail(ping.ID, s); err != nil {
		return err
	}
	buf := make([]byte, ping.PingSize)
	if _, err := rand.Read(buf); err != nil {
		return err
	}
	if _, err := s.Write(buf); err != nil {
		return err
	}
	back := make([]byte, len(buf))
	if _, err := io.ReadFull(s, back); err != nil {
		return err
	}
	if !bytes.Equal(buf, back) {
		return errors.New("ping: a wrong answer")
	}
	return nil
}
