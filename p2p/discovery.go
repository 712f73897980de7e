package p2p

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// MDNSService is the mDNS service name under which the machines of org
// advertise themselves on the local network: "_cshare-" and the first 6 hex
// digits of a hash of the org ID, then "._udp".
//
// The name carries nothing secret (an org ID is no credential: joining needs
// the org key or an invite) and it does not show the org ID itself to the
// LAN. Scoping it to the org keeps machines of other orgs on the same LAN
// from dialling each other for nothing; a collision of the 24-bit hash only
// costs such a dial, since a found peer is only dialled, never trusted. The
// service label stays within DNS-SD's 15 characters.
func MDNSService(org string) string {
	s := sha256.Sum256([]byte("cshare mdns\x00" + org))
	return "_cshare-" + hex.EncodeToString(s[:3]) + "._udp"
}

// mdnsDialTimeout bounds a dial to a peer found by mDNS.
const mdnsDialTimeout = 10 * time.Second

// StartMDNS advertises this host on the local network under service and
// dials every peer found there. A found peer is only dialled: whether its
// messages count is decided by the org's validators, as for any peer. It
// replaces a service started before; StopMDNS or Close ends it.
func (h *Host) StartMDNS(service string) error {
	h.StopMDNS()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	s := mdns.NewMdnsService(h.h, service, mdnsNotifee{h})
	if err := s.Start(); err != nil {
		return fmt.Errorf("p2p: mdns: %w", err)
	}
	h.mdns = s
	return nil
}

// StopMDNS stops advertising and looking on the local network.
func (h *Host) StopMDNS() {
	h.mu.Lock()
	s := h.mdns
	h.mdns = nil
	h.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}

type mdnsNotifee struct{ h *Host }

func (n mdnsNotifee) HandlePeerFound(ai peer.AddrInfo) {
	h := n.h
	if ai.ID == h.ID() || h.ctx.Err() != nil || h.h.Network().Connectedness(ai.ID) == network.Connected {
		return
	}
	h.log.Debug("mdns: found a peer", "peer", ai.ID.String(), "addrs", len(ai.Addrs))
	go func() {
		ctx, c := context.WithTimeout(h.ctx, mdnsDialTimeout)
		defer c()
		if err := h.h.Connect(ctx, ai); err != nil {
			h.log.Debug("mdns: dial", "peer", ai.ID.String(), "err", err)
		}
	}()
}

// DialPeer connects to machine id using the given addresses (multiaddrs,
// with or without a /p2p/<id> suffix of that machine) and those the
// peerstore holds: direct ones first, then its /p2p-circuit addresses
// through the org's relays (nat.go). The caller keeps its own schedule of
// attempts, so libp2p's per-address dial backoff is cleared first: a
// machine restarted on its remembered address is reached at the next
// attempt, not minutes later. The peer is protected from
// connection-manager trimming.
func (h *Host) DialPeer(ctx context.Context, id peer.ID, addrs []string) error {
	ai := dialInfo(id, addrs)
	if sw, ok := h.h.Network().(*swarm.Swarm); ok {
		sw.Backoff().Clear(id)
	}
	if err := h.h.Connect(ctx, ai); err != nil {
		return err
	}
	h.h.ConnManager().Protect(id, "cshare-bootstrap")
	return nil
}

// dialInfo is id with those of addrs that can be dialled (multiaddrs, with
// or without a /p2p/<id> suffix of that machine; unspecified IPs left out).
func dialInfo(id peer.ID, addrs []string) peer.AddrInfo {
	ai := peer.AddrInfo{ID: id}
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			continue
		}
		t, rest := peer.SplitAddr(a)
		if rest != "" && rest != id {
			continue
		}
		if t == nil || manet.IsIPUnspecified(t) {
			continue
		}
		ai.Addrs = append(ai.Addrs, t)
	}
	return ai
}

// KeepAddrs puts addrs (as DialPeer takes them) in the peerstore for id for
// a while, so that a stream opened to id finds an address to dial should its
// connection close first (one that came in from id leaves the peerstore
// only what identify learnt, which a connection reset at once may not have).
func (h *Host) KeepAddrs(id peer.ID, addrs []string) {
	if ai := dialInfo(id, addrs); len(ai.Addrs) > 0 {
		h.h.Peerstore().AddAddrs(id, ai.Addrs, peerstore.TempAddrTTL)
	}
}

// PeerAddrs are the addresses the peerstore holds for id (learnt by
// identify from a connected peer, or dialled), each ending in /p2p/<id>.
func (h *Host) PeerAddrs(id peer.ID) []string {
	var out []string
	for _, a := range h.h.Peerstore().Addrs(id) {
		if manet.IsIPUnspecified(a) {
			continue
		}
		out = append(out, a.String()+"/p2p/"+id.String())
	}
	return out
}

// Connected reports whether this host has a connection to id.
func (h *Host) Connected(id peer.ID) bool {
	return h.h.Network().Connectedness(id) == network.Connected
}

// ListenAddrs are the addresses this host listens on, as bound: a port 0
// of Config.ListenAddrs is the port the system chose. The relay
// transport's /p2p-circuit is left out.
func (h *Host) ListenAddrs() []string {
	var out []string
	for _, a := range h.h.Network().ListenAddresses() {
		if isRelayAddr(a) {
			continue
		}
		out = append(out, a.String())
	}
	return out
}
