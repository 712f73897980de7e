package p2p

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// isRelayAddr reports whether a is a /p2p-circuit address.
func isRelayAddr(a ma.Multiaddr) bool {
	_, err := a.ValueForProtocol(ma.P_CIRCUIT)
	return err == nil
}

// relayOf is the relay's peer ID in circuit address a (the /p2p/ before
// /p2p-circuit); ok is false for other addresses.
func relayOf(a ma.Multiaddr) (id peer.ID, ok bool) {
	var last peer.ID
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_P2P:
			p, err := peer.IDFromBytes(c.RawValue())
			if err != nil {
				return "", false
			}
			last = p
		case ma.P_CIRCUIT:
			return last, last != ""
		}
	}
	return "", false
}

// relayUsable reports whether this host may use relay r: an approved
// machine of an org it has joined.
func (g *Gate) relayUsable(r peer.ID) bool {
	return !g.joinedNone() && g.isApproved(r)
}

// relayACL is the relay service's access control: reservations and
// relayed connections for the approved machines of the org only.
type relayACL struct{ h *Host }

func (a relayACL) AllowReserve(p peer.ID, _ ma.Multiaddr) bool {
	if a.h.gate.relayUsable(p) {
		return true
	}
	a.h.refused.WithLabelValues("relay reservation").Inc()
	return false
}

func (a relayACL) AllowConnect(src peer.ID, _ ma.Multiaddr, dest peer.ID) bool {
	if a.h.gate.relayUsable(src) && a.h.gate.relayUsable(dest) {
		return true
	}
	a.h.refused.WithLabelValues("relayed connection").Inc()
	return false
}

// relayCandidates is autorelay's peer source: the org's machines that
// relay (their heartbeat says so, or identify says they serve the relay
// protocol), approved, not this host, at most num.
func (h *Host) relayCandidates(_ context.Context, num int) <-chan peer.AddrInfo {
	ids := h.orgRelays()
	if len(ids) > num {
		ids = ids[:num]
	}
	out := make(chan peer.AddrInfo, len(ids))
	defer close(out)
	for _, id := range ids {
		ai := peer.AddrInfo{ID: id}
		for _, a := range h.h.Peerstore().Addrs(id) {
			if !isRelayAddr(a) {
				ai.Addrs = append(ai.Addrs, a)
			}
		}
		out <- ai
	}
	return out
}

// Protocols of NAT traversal the gate names (gate.go): the relay's, and
// AutoNAT v2's dial-back.
const (
	hopProtocol       = "/libp2p/circuit/relay/0.2.0/hop"
	autoNATv2DialBack = "/libp2p/autonat/2/dial-back"
)

// orgRelays are the approved machines of this host's orgs that relay,
// sorted; their heartbeat addresses go into the peerstore.
func (h *Host) orgRelays() []peer.ID {
	seen := map[peer.ID]bool{}
	var ids []peer.ID
	add := func(id peer.ID) {
		if id != h.ID() && !seen[id] && h.gate.relayUsable(id) {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	h.mu.Lock()
	orgs := make([]*Org, 0, len(h.orgs))
	for _, o := range h.orgs {
		orgs = append(orgs, o)
	}
	h.mu.Unlock()
	for _, o := range orgs {
		for _, hb := range o.relayBeats() {
			id, err := hb.MachineID()
			if err != nil {
				continue
			}
			if ai := dialInfo(id, hb.Addrs); len(ai.Addrs) > 0 {
				h.h.Peerstore().AddAddrs(id, slices.DeleteFunc(ai.Addrs, isRelayAddr), relayAddrTTL)
			}
			add(id)
		}
	}
	for _, p := range h.h.Network().Peers() {
		if ps, err := h.h.Peerstore().SupportsProtocols(p, hopProtocol); err == nil && len(ps) > 0 {
			add(p)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// relayAddrTTL is how long a relay's heartbeat addresses stay in the
// peerstore.
const relayAddrTTL = 10 * time.Minute

// relayBeats are the latest heartbeats of machines that said they relay.
func (o *Org) relayBeats() []Heartbeat {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Heartbeat
	for _, c := range o.cache {
		if c.hb.Relay {
			out = append(out, c.hb)
		}
	}
	return out
}
