package p2p

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/host/autorelay"
	bhost "github.com/libp2p/go-libp2p/p2p/host/basic"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/libp2p/go-libp2p/p2p/protocol/identify"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"go.uber.org/fx"
)

// Across NATs (issue 32; docs/design.md §23). A host finds out whether it
// can be reached from outside (AutoNAT v1, which asks peers to dial it
// back, and v2, which confirms each public address), and then:
//
//   - publicly reachable, it serves as a circuit relay v2 (RelayAuto; or
//     always, RelayOn; never, RelayOff) for the approved machines of its
//     org and for nobody else: relayACL refuses a reservation or a relayed
//     connection to anyone else, by the same standing the Gate keeps, and
//     every relay protocol stream is gated as any other;
//   - private, it reserves slots on its org's relays (libp2p's autorelay,
//     fed by relayCandidates: machines whose heartbeat says they relay, or
//     that identify says serve the relay protocol), so that the org's
//     machines reach it through them at its /p2p-circuit addresses, which
//     its heartbeats carry. The gater refuses a dial through any relay
//     that is not an approved machine of the org: no relay outside it is
//     used;
//   - over a relayed connection, two machines try to open a direct one
//     (DCUtR hole punching: at once when the relayed connection comes in,
//     then again on pathLoop's backoff for as long as they reach each
//     other only through the relay). A relayed connection whose peer has a
//     direct one as well is closed once only gossip runs on it, so the
//     gossip moves to the direct path.
//
// The org's relays serve relayed connections without a data or time limit
// (they relay for their own org only, within relayResources' caps on
// reservations and circuits): the ledger, heartbeats and offers go through
// them as over a direct connection. Bulk streams (dataset blocks, item
// output) are opened through Bulk, which waits for a direct connection
// while one is being punched, and otherwise goes through the relay.

// RelayMode says when a host serves as a circuit relay for its org.
type RelayMode int

const (
	RelayAuto RelayMode = iota // when it finds itself publicly reachable
	RelayOn                    // always (node.yaml relay: {serve: true})
	RelayOff                   // never (relay: {serve: false})
)

// Reachability, as Host.Reachability gives it.
const (
	ReachPublic  = "public"
	ReachPrivate = "private"
	ReachUnknown = "unknown"
)

// Connection paths, as Host.Connections and Host.Path give them.
const (
	PathDirect  = "direct"
	PathRelayed = "relayed"
)

// Timings of the direct-path keeper (variables for tests).
var (
	pathTick = time.Second
	// A peer reached only through a relay gets its first retry this long
	// after that was seen (the relayed connection's own punch comes
	// first), then at doubling intervals up to directRetryMax; at once
	// when it starts to serve hole punching, or this host finds its own
	// public address (a punch needs both).
	directRetryMin = 2 * time.Second
	directRetryMax = 5 * time.Minute
	// punchWindow: a relayed connection this young is taken to be being
	// punched (DCUtR starts as soon as it is identified), as is a peer
	// with an attempt in flight: Bulk waits for the direct connection.
	punchWindow = 15 * time.Second
	// relayBackoff is how long autorelay leaves a candidate that refused
	// a reservation (a machine not yet approved there, or one that does
	// not relay yet) before asking it again.
	relayBackoff = 15 * time.Second
)

// relayResources are the caps of the relay this host serves: relayed
// connections are unlimited in data and time (the org's own traffic), and
// the number of reservations and circuits bounds what the relay holds.
// The per-IP and per-ASN caps, meant for relays open to anyone, are the
// reservation cap: an office behind one address may reserve for each of
// its machines.
func relayResources() relayv2.Resources {
	r := relayv2.DefaultResources()
	r.Limit = nil
	r.MaxReservations = 1024
	r.MaxReservationsPerIP = r.MaxReservations
	r.MaxReservationsPerASN = r.MaxReservations
	r.MaxCircuits = 128
	r.BufferSize = 32 << 10
	return r
}

// basicHost is what this file uses of libp2p's basic host beyond
// host.Host.
type basicHost interface {
	Reachability() network.Reachability
	ConfirmedAddrs() (reachable, unreachable, unknown []ma.Multiaddr)
	AllAddrs() []ma.Multiaddr
	IDService() identify.IDService
}

// natState is the host's side of NAT traversal.
type natState struct {
	mode    RelayMode
	tick    time.Duration              // pathTick when the host started
	oam     bhost.ObservedAddrsManager // observed addresses (identify); may be nil
	hps     *holepunch.Service
	metrics *natMetrics
	movedAt time.Time // dropMoved's last look (natLoop's goroutine only)

	mu        sync.Mutex
	relay     *relayv2.Relay // while serving
	reach     string         // last computed reachability ("" before the first)
	saidPriv  bool           // the log said once that this host is private
	saidPub   bool
	canPunch  bool                   // this host had a public address at the last tick
	paths     map[peer.ID]*pathState // peers reached only through a relay
	attempts  map[peer.ID]bool       // direct attempts in flight
	lastPunch map[peer.ID]time.Time  // hole punches begun (event tracer)
}

type pathState struct {
	next    time.Time
	backoff time.Duration
}

// natOptions are the libp2p options of NAT traversal for cfg; oam is
// filled in when the host is built.
func (h *Host) natOptions(cfg Config, oam *bhost.ObservedAddrsManager) []libp2p.Option {
	opts := []libp2p.Option{
		libp2p.EnableRelay(), // the circuit transport: relayed connections in and out
		libp2p.EnableNATService(),
		libp2p.EnableAutoNATv2(),
		libp2p.EnableAutoRelayWithPeerSource(h.relayCandidates,
			autorelay.WithMinCandidates(1),
			autorelay.WithBootDelay(0),
			autorelay.WithBackoff(relayBackoff),
			autorelay.WithMinInterval(relayBackoff/3),
			autorelay.WithNumRelays(2),
			autorelay.WithMaxCandidateAge(10*time.Minute)),
		libp2p.WithFxOption(fx.Populate(oam)),
	}
	if cfg.PortMap {
		opts = append(opts, libp2p.NATPortMap())
	}
	return opts
}

// startNAT starts hole punching, the reachability watch (which starts and
// stops the relay service) and the direct-path keeper, once the libp2p
// host exists.
func (h *Host) startNAT(cfg Config) error {
	bh, ok := h.h.(basicHost)
	if !ok {
		return nil
	}
	var mt holepunch.MetricsTracer = h.nat.metrics
	hps, err := holepunch.NewService(h.h, bh.IDService(), h.holePunchAddrs,
		holepunch.WithMetricsAndEventTracer(mt, punchEvents{h}))
	if err != nil {
		return err
	}
	h.nat.hps = hps
	sub, err := h.h.EventBus().Subscribe([]any{new(event.EvtLocalReachabilityChanged), new(event.EvtHostReachableAddrsChanged),
		new(event.EvtPeerProtocolsUpdated)}, eventbus.Name("cshare nat"))
	if err != nil {
		_ = hps.Close()
		return err
	}
	h.h.Network().Notify(&network.NotifyBundle{ConnectedF: func(_ network.Network, c network.Conn) { go h.probeOlder(c) }})
	go h.natLoop(sub)
	return nil
}

// closeNAT stops the relay service and hole punching.
func (h *Host) closeNAT() {
	h.nat.mu.Lock()
	r := h.nat.relay
	h.nat.relay = nil
	h.nat.mu.Unlock()
	if r != nil {
		_ = r.Close()
	}
	if h.nat.hps != nil {
		_ = h.nat.hps.Close()
	}
}

// natLoop follows reachability changes and keeps direct paths until the
// host closes.
func (h *Host) natLoop(sub event.Subscription) {
	defer sub.Close()
	t := time.NewTicker(h.nat.tick)
	defer t.Stop()
	h.reachabilityChanged()
	for {
		select {
		case <-h.ctx.Done():
			return
		case ev := <-sub.Out():
			if pu, ok := ev.(event.EvtPeerProtocolsUpdated); ok {
				if slices.Contains(pu.Added, holepunch.Protocol) {
					h.directDue(pu.Peer) // it can be punched to now
				}
				continue
			}
			h.reachabilityChanged()
		case <-t.C:
			h.reachabilityChanged() // v2's confirmations have no event of their own when nothing changed
			h.dropMoved(time.Now())
			h.keepPaths(time.Now())
		}
	}
}

// Reachability is whether this host can be reached from outside its
// network: "public" (AutoNAT found it reachable, or AutoNAT v2 confirmed
// one of its public addresses, or it listens on a public address of its
// own interface that AutoNAT has not found unreachable), "private"
// (AutoNAT's dial-backs failed: it is behind a NAT or a firewall), or
// "unknown" (not found out yet).
//
// The interface address counts because AutoNAT alone cannot tell the one
// public machine of an org that it is public: v1 asks only peers that have
// a public address themselves, and v2's servers (the private machines) may
// be asked only a while after they were approved (a first round cut short
// by the gate's reconnection of a newly approved machine costs each server
// two minutes of v2's throttle).
func (h *Host) Reachability() string {
	bh, ok := h.h.(basicHost)
	if !ok {
		return ReachUnknown
	}
	reachable, unreachable, _ := bh.ConfirmedAddrs()
	v1 := bh.Reachability()
	switch {
	case v1 == network.ReachabilityPublic || slices.ContainsFunc(reachable, manet.IsPublicAddr):
		return ReachPublic
	case v1 == network.ReachabilityPrivate:
		return ReachPrivate
	case slices.ContainsFunc(unreachable, manet.IsPublicAddr):
		return ReachPrivate
	case slices.ContainsFunc(h.h.Network().ListenAddresses(), publicIP):
		return ReachPublic
	}
	return ReachUnknown
}

// publicIP: a is a public IP address (not a name, not a relay's).
func publicIP(a ma.Multiaddr) bool {
	_, err := manet.ToIP(a)
	return err == nil && !isRelayAddr(a) && manet.IsPublicAddr(a)
}

// reachabilityChanged recomputes the reachability, says in the log once
// what it means, and starts or stops the relay service.
func (h *Host) reachabilityChanged() {
	r := h.Reachability()
	h.nat.mu.Lock()
	changed := r != h.nat.reach
	h.nat.reach = r
	sayPriv := r == ReachPrivate && !h.nat.saidPriv
	sayPub := r == ReachPublic && !h.nat.saidPub
	h.nat.saidPriv = h.nat.saidPriv || sayPriv
	h.nat.saidPub = h.nat.saidPub || sayPub
	h.nat.mu.Unlock()
	if !changed {
		return
	}
	serve := h.nat.mode == RelayOn || h.nat.mode == RelayAuto && r == ReachPublic
	h.serveRelay(serve)
	switch {
	case sayPriv:
		h.log.Warn("this machine cannot be reached from outside its network (it is behind a NAT or a firewall): " +
			"it reserves a slot on the org's relays, through which the org's machines reach it, " +
			"and keeps trying to open a direct connection to each of them (hole punching)")
	case sayPub:
		msg := "this machine can be reached from outside its network"
		if serve {
			msg += "; it serves as a relay for the org's machines that cannot"
		}
		h.log.Info(msg, "addrs", strings.Join(h.PublicAddrs(), " "))
	}
}

// serveRelay starts or stops the relay service.
func (h *Host) serveRelay(on bool) {
	h.nat.mu.Lock()
	defer h.nat.mu.Unlock()
	if on == (h.nat.relay != nil) || h.ctx.Err() != nil {
		return
	}
	if !on {
		_ = h.nat.relay.Close()
		h.nat.relay = nil
		h.log.Info("no longer serving as a relay for the org's machines")
		return
	}
	r, err := relayv2.New(h.h, relayv2.WithResources(relayResources()), relayv2.WithACL(relayACL{h}),
		relayv2.WithMetricsTracer(h.nat.metrics.relayTracer()))
	if err != nil {
		h.log.Warn("could not start the relay service", "err", err)
		return
	}
	h.nat.relay = r
	if h.nat.mode == RelayOn {
		h.log.Info("serving as a relay for the org's machines (node.yaml relay.serve)")
	}
}

// RelayServing reports whether this host serves as a relay now.
func (h *Host) RelayServing() bool {
	h.nat.mu.Lock()
	defer h.nat.mu.Unlock()
	return h.nat.relay != nil
}

// holePunchAddrs are this host's public addresses for hole punching: its
// own public addresses and those its peers observe it at (a NAT's outside
// address and port), even one peer's observation.
func (h *Host) holePunchAddrs() []ma.Multiaddr {
	var addrs []ma.Multiaddr
	if bh, ok := h.h.(basicHost); ok {
		addrs = bh.AllAddrs()
	}
	if h.nat.oam != nil {
		addrs = append(addrs, h.nat.oam.Addrs(1)...)
	}
	addrs = ma.Unique(addrs)
	return slices.DeleteFunc(addrs, func(a ma.Multiaddr) bool { return isRelayAddr(a) || !manet.IsPublicAddr(a) })
}

// PublicAddrs are the public addresses this host has or is observed at
// (a NAT's outside address and port), sorted.
func (h *Host) PublicAddrs() []string {
	out := []string{}
	for _, a := range h.holePunchAddrs() {
		out = append(out, a.String())
	}
	sort.Strings(out)
	return out
}
