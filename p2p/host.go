package p2p

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	bhost "github.com/libp2p/go-libp2p/p2p/host/basic"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	yamux "github.com/libp2p/go-libp2p/p2p/muxer/yamux"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/net/swarm"
	noise "github.com/libp2p/go-libp2p/p2p/security/noise"
	libp2ptls "github.com/libp2p/go-libp2p/p2p/security/tls"
	quic "github.com/libp2p/go-libp2p/p2p/transport/quic"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultListenAddrs are used when Config.ListenAddrs is empty.
var DefaultListenAddrs = []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}

// Connection manager watermarks.
const (
	ConnLow  = 64
	ConnHigh = 256
)

// scoreInspectPeriod is how often PeerScore's snapshot is refreshed.
var scoreInspectPeriod = time.Second

// Config configures New.
type Config struct {
	Key         crypto.PrivKey        // required; see LoadOrCreateKey
	ListenAddrs []string              // multiaddrs; default DefaultListenAddrs
	Logger      *slog.Logger          // default: discard
	Metrics     prometheus.Registerer // may be nil: no metrics registered
	Trace       TraceHook             // may be nil; sees this host's GossipSub events (benchmarks, diagnosis)
	// Relay says when the host serves as a circuit relay for its org's
	// approved machines (nat.go): RelayAuto, the zero value, when it finds
	// itself publicly reachable.
	Relay RelayMode
	// PortMap asks the router for a port mapping (UPnP, NAT-PMP).
	PortMap bool
}

// Host is the node's libp2p host with its GossipSub router.
type Host struct {
	h      host.Host
	ps     *pubsub.PubSub
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	key    crypto.PrivKey

	rejected *prometheus.CounterVec
	ignored  *prometheus.CounterVec
	accepted *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	refused  *prometheus.CounterVec
	traffic  *traffic
	gate     *Gate
	floods   *floods
	psPeers  psPeers // peers GossipSub has a writer to
	nat      natState

	mu     sync.Mutex
	mdns   mdns.Service // nil unless StartMDNS
	orgs   map[string]*Org
	scores map[peer.ID]float64
	closed bool
}

// New starts a libp2p host (TCP + QUIC, TLS or Noise, yamux, connection
// manager, resource manager with the default limits scaled to the machine,
// AutoNAT, the org's relays, hole punching: nat.go) and a GossipSub router
// with peer scoring, a 64 KiB payload cap, content-hash message IDs and
// strict message signing.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Key == nil {
		return nil, errors.New("p2p: Config.Key is required")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	listen := cfg.ListenAddrs
	if len(listen) == 0 {
		listen = DefaultListenAddrs
	}
	cm, err := connmgr.NewConnManager(ConnLow, ConnHigh, connmgr.WithGracePeriod(time.Minute))
	if err != nil {
		return nil, err
	}
	var rmOpts []rcmgr.Option
	if cfg.Metrics == nil {
		rmOpts = append(rmOpts, rcmgr.WithMetricsDisabled())
	}
	rm, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(peerLimits.AutoScale()), rmOpts...)
	if err != nil {
		return nil, err
	}
	gate := newGate(nil)
	hctx, cancel := context.WithCancel(context.Background())
	h := &Host{
		log:    logger,
		ctx:    hctx,
		cancel: cancel,
		key:    cfg.Key,
		orgs:   make(map[string]*Org),
		scores: make(map[peer.ID]float64),
		gate:   gate,
		floods: newFloods(),
		nat: natState{mode: cfg.Relay, tick: pathTick, paths: map[peer.ID]*pathState{},
			attempts: map[peer.ID]bool{}, lastPunch: map[peer.ID]time.Time{}},
	}
	gate.h = h // before the host exists: a connection may come at once
	h.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cshare_p2p_refused_total",
		Help: "What this host refused to peers outside the org: streams by protocol, joiners' admissions, connections, relay reservations and relayed connections.",
	}, []string{"what"})
	if cfg.Metrics != nil {
		h.refused = registerOrExisting(cfg.Metrics, h.refused)
	}
	h.nat.metrics = newNATMetrics(h, cfg.Metrics)
	var oam bhost.ObservedAddrsManager
	opts := []libp2p.Option{
		libp2p.Identity(cfg.Key),
		libp2p.ConnectionGater(gate),
		libp2p.ListenAddrStrings(listen...),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(quic.NewTransport),
		Security(),
		libp2p.Muxer(yamux.ID, yamux.DefaultTransport),
		libp2p.ConnectionManager(cm),
		libp2p.ResourceManager(gatedRM{ResourceManager: rm, g: gate}),
		libp2p.SwarmOpts(swarm.WithDialRanker(TCPFirst)),
		libp2p.UserAgent("cshare"),
	}
	opts = append(opts, h.natOptions(cfg, &oam)...)
	if cfg.Metrics != nil {
		opts = append(opts, libp2p.PrometheusRegisterer(cfg.Metrics))
	} else {
		opts = append(opts, libp2p.DisableMetrics())
	}
	lh, err := libp2p.New(opts...)
	if err != nil {
		cancel()
		rm.Close()
		return nil, fmt.Errorf("p2p: start host: %w", err)
	}
	h.mu.Lock()
	h.h = lh
	h.nat.oam = oam
	h.mu.Unlock()
	h.rejected, h.ignored, h.accepted = newCounters(cfg.Metrics)
	h.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cshare_gossip_dropped_total",
		Help: "Gossip messages dropped for want of queue room (not refused by a validator), by reason.",
	}, []string{"reason"})
	if cfg.Metrics != nil {
		h.dropped = registerOrExisting(cfg.Metrics, h.dropped)
	}
	h.traffic = newTraffic(cfg.Metrics)

	author, err := processAuthor()
	if err != nil {
		cancel()
		_ = lh.Close()
		return nil, err
	}
	ps, err := pubsub.NewGossipSub(hctx, lh,
		pubsub.WithMessageIdFn(contentID),
		pubsub.WithMaxMessageSize(MaxPayloadSize+envelopeSlack),
		// Heartbeats and heads announcements carry their sender's own
		// signature, checked by our validators with a cached expanded key;
		// libp2p's envelope signature would be a second Ed25519 verify per
		// message per node, the largest cost of a big org's gossip.
		pubsub.WithMessageSignaturePolicy(pubsub.StrictNoSign),
		pubsub.WithMessageAuthor(author), // see processAuthor
		pubsub.WithPeerScore(peerScoreParams(func(p peer.ID) float64 { return h.floods.score(p) + gate.appScore(p) }), peerScoreThresholds()),
		pubsub.WithPeerScoreInspect(pubsub.PeerScoreInspectFn(h.inspectScores), scoreInspectPeriod),
		pubsub.WithFloodPublish(true),
		// The closed org (gate.go): only those who may have an org's
		// topic are recorded as its subscribers (flood publishing sends
		// to every subscriber) or taken into its mesh.
		pubsub.WithSubscriptionFilter(subFilter{gate}),
		pubsub.WithPeerFilter(gate.peerFilter),
		pubsub.WithGossipSubParams(gossipParams()),
		// Bursts (a wide job starting on every machine at once) overflow
		// the defaults (32), and a dropped announcement is only repaired by
		// the next heartbeat, an interval later.
		pubsub.WithValidateQueueSize(validateQueueSize),
		pubsub.WithPeerOutboundQueueSize(outboundQueueSize),
		pubsub.WithRawTracer(dropTracer{self: lh.ID(), dropped: h.dropped, traffic: h.traffic, hook: cfg.Trace, writers: &h.psPeers}),
		pubsub.WithLogger(logger),
	)
	if err != nil {
		cancel()
		lh.Close()
		return nil, fmt.Errorf("p2p: start pubsub: %w", err)
	}
	h.ps = ps
	if err := h.startNAT(cfg); err != nil {
		cancel()
		_ = lh.Close()
		return nil, fmt.Errorf("p2p: start hole punching: %w", err)
	}
	lh.SetStreamHandler(HeartbeatProtocol, h.handleHeartbeatStream)
	go gate.sweepLoop()
	return h, nil
}

// peerLimits are libp2p's default resource limits with more connections (and
// file descriptors) per peer: 8 and 4 leave no room for a hole punch to a
// peer whose stale addresses (a laptop's old network, a NAT's earlier
// mappings) are still being dialled, each dial holding a slot until it
// times out into the NAT that drops it (make nat-bench: "cannot reserve
// connection: resource limit exceeded").
var peerLimits = func() rcmgr.ScalingLimitConfig {
	l := rcmgr.DefaultLimits
	l.PeerBaseLimit.ConnsInbound, l.PeerBaseLimit.ConnsOutbound, l.PeerBaseLimit.Conns = 16, 16, 32
	l.PeerBaseLimit.FD = 16
	return l
}()

// GossipSub queue sizes (see NewHost).
const (
	validateQueueSize = 4096
	outboundQueueSize = 1024
)

// contentID is the message ID: sha256 of the message data. Identical data is
// one message whoever sends it and however often it is re-signed.
func contentID(m *pb.Message) string {
	s := sha256.Sum256(m.GetData())
	return string(s[:])
}

func newCounters(reg prometheus.Registerer) (rej, ign, acc *prometheus.CounterVec) {
	rej = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cshare_gossip_rejected_total",
		Help: "Gossip messages rejected by cshare validators (the forwarder's peer score is lowered), by topic kind and reason.",
	}, []string{"topic", "reason"})
	ign = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cshare_gossip_ignored_total",
		Help: "Gossip messages dropped without penalty by cshare validators, by topic kind and reason.",
	}, []string{"topic", "reason"})
	acc = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cshare_gossip_accepted_total",
		Help: "Gossip messages accepted by cshare validators, by topic kind.",
	}, []string{"topic"})
	if reg != nil {
		rej = registerOrExisting(reg, rej)
		ign = registerOrExisting(reg, ign)
		acc = registerOrExisting(reg, acc)
	}
	return rej, ign, acc
}

func registerOrExisting[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(C); ok {
				return ex
			}
		}
	}
	return c
}

func (h *Host) inspectScores(m map[peer.ID]float64) {
	h.mu.Lock()
	h.scores = m
	h.mu.Unlock()
}

// PeerScore returns the GossipSub score this host gives p, as of the last
// inspection (refreshed every second). ok is false for unknown peers.
func (h *Host) PeerScore(p peer.ID) (score float64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	score, ok = h.scores[p]
	return score, ok
}

// Security is the node's connection security, in order of preference:
// TLS 1.3 (AES-GCM, which AES-NI makes far cheaper per byte than Noise's
// ChaCha20-Poly1305: a 1 GiB dataset transfer on loopback cost 5.0 CPU-s/GB
// against 5.9, and ran at 255-266 MB/s against 215-222), then Noise, which
// nodes of earlier versions offer alone (a dialler proposes TLS first and
// settles on Noise with them).
func Security() libp2p.Option {
	return libp2p.ChainOptions(libp2p.Security(libp2ptls.ID, libp2ptls.New), libp2p.Security(noise.ID, noise.New))
}

// ID is this host's peer ID, the machine ID.
func (h *Host) ID() peer.ID { return h.h.ID() }

// LibP2P exposes the underlying host (for stream protocols of other packages).
func (h *Host) LibP2P() host.Host { return h.h }

// PubSub exposes the GossipSub router.
func (h *Host) PubSub() *pubsub.PubSub { return h.ps }

// Addrs returns this host's dialable multiaddrs, each ending in /p2p/<id>:
// listen addresses with unspecified IPs expanded to every interface address,
// plus addresses learnt by identify, plus its addresses through the org's
// relays where it holds a reservation (/p2p-circuit). Public first, then
// private, then loopback; sorted within each group.
func (h *Host) Addrs() []string {
	seen := map[string]bool{}
	var all []ma.Multiaddr
	add := func(as []ma.Multiaddr) {
		for _, a := range as {
			if _, via := relayOf(a); manet.IsIPUnspecified(a) || isRelayAddr(a) && !via {
				continue // the relay transport's bare /p2p-circuit is no address
			}
			if k := a.String(); !seen[k] {
				seen[k] = true
				all = append(all, a)
			}
		}
	}
	if ifaces, err := h.h.Network().InterfaceListenAddresses(); err == nil {
		add(ifaces)
	}
	add(h.h.Addrs())
	rank := func(a ma.Multiaddr) int {
		switch {
		case manet.IsIPLoopback(a):
			return 2
		case manet.IsPrivateAddr(a):
			return 1
		}
		return 0
	}
	sort.SliceStable(all, func(i, j int) bool {
		ri, rj := rank(all[i]), rank(all[j])
		if ri != rj {
			return ri < rj
		}
		return all[i].String() < all[j].String()
	})
	suffix := "/p2p/" + h.ID().String()
	out := make([]string, 0, len(all))
	for _, a := range all {
		out = append(out, a.String()+suffix)
	}
	return out
}

// Connect dials the given multiaddrs, which must end in /p2p/<id>; addresses
// of the same peer are tried together. Peers dialled this way are protected
// from connection-manager trimming. It returns nil if at least one peer was
// connected, else the joined errors.
func (h *Host) Connect(ctx context.Context, addrs []string) error {
	var errs []error
	var mas []ma.Multiaddr
	for _, s := range addrs {
		a, err := ma.NewMultiaddr(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", s, err))
			continue
		}
		mas = append(mas, a)
	}
	infos, err := peer.AddrInfosFromP2pAddrs(mas...)
	if err != nil {
		errs = append(errs, err)
	}
	type result struct {
		id  peer.ID
		err error
	}
	results := make(chan result, len(infos))
	n := 0
	for _, ai := range infos {
		if ai.ID == h.ID() {
			continue
		}
		n++
		go func(ai peer.AddrInfo) {
			err := h.h.Connect(ctx, ai)
			if err == nil {
				h.h.ConnManager().Protect(ai.ID, "cshare-bootstrap")
			}
			results <- result{ai.ID, err}
		}(ai)
	}
	ok := 0
	for i := 0; i < n; i++ {
		r := <-results
		if r.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.id, r.err))
			continue
		}
		ok++
	}
	if ok > 0 {
		return nil
	}
	if len(errs) == 0 {
		return errors.New("p2p: no peer addresses to connect to (want multiaddrs ending in /p2p/<id>)")
	}
	return fmt.Errorf("p2p: could not connect to any peer: %w", errors.Join(errs...))
}

// Peers returns the connected peers, sorted.
func (h *Host) Peers() []peer.ID {
	ps := h.h.Network().Peers()
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// Close leaves every org, stops pubsub and closes the host.
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	orgs := make([]*Org, 0, len(h.orgs))
	for _, o := range h.orgs {
		orgs = append(orgs, o)
	}
	h.mu.Unlock()
	h.StopGossip() // before the orgs: leave no PRUNE behind (see StopGossip)
	for _, o := range orgs {
		o.Close()
	}
	h.StopMDNS()
	h.closeNAT()
	return h.h.Close()
}

// processAuthor returns a random author ID for this process's GossipSub
// messages (their envelope's From, which nothing reads: our payloads carry
// and sign their sender, message IDs are content hashes). With the host's
// own ID as author, a restarted process that was offered its previous
// process's recent messages (IHAVE, then its own IWANT) rejected them as
// "self originated" and GossipSub counted each as an invalid delivery of
// the honest peer that sent it: -100·n² each, so after a restart or two
// the restarted machine scored its peers below the publish and graylist
// thresholds, sent them nothing and ignored what they sent: offline both
// ways, its items and theirs run again (make chaos, sigterm-restart). An
// author of its own per process never matches a later process's ID; nodes
// of earlier versions only compare From with their own ID, which it never
// is either.
func processAuthor() (peer.ID, error) {
	_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("p2p: gossip author key: %w", err)
	}
	return peer.IDFromPublicKey(pub)
}

// gossipParams tunes GossipSub for an org: a full mesh of machines (each
// dials every other, see node) where publishers flood-publish to every
// peer. Every message then reaches every machine in one hop, and the rest of
// GossipSub is repair for a lost copy, so it is kept small: each extra copy
// is a frame encrypted, written and read per peer, and in a 100-machine org
// the repair traffic was 6 of every 7 RPCs (per machine and second: 10
// heartbeats, 39 duplicate copies from mesh forwarding at D=4, and 22 IHAVE
// RPCs of lazy gossip to a quarter of the peers).
//   - Mesh degree 2 to 3 (links are symmetric: a machine grafts two peers
//     and is grafted by others, and above Dhi it prunes back to D): each
//     machine forwards a message to two or three mesh peers, so a machine the
//     publisher could not reach directly still gets it in a few hops, and
//     every other gets two or three duplicates instead of four to six.
//   - Lazy gossip (IHAVE) goes to two peers a heartbeat, not a quarter of
//     them: a copy lost everywhere else is still offered within a second.
//   - Dout 0: GossipSub's outbound quota defends open networks against
//     eclipse by inbound sybils; here only the org's approved machines pass
//     the validators, so a peer outside the org has nothing to relay.
//   - IDONTWANT (a control message per mesh peer for every message received)
//     is kept for messages of 16 KiB and more: for smaller ones it costs as
//     many writes as the duplicate forwards it would save.
func gossipParams() pubsub.GossipSubParams {
	p := pubsub.DefaultGossipSubParams()
	p.D, p.Dlo, p.Dhi, p.Dout, p.Dscore, p.Dlazy = 2, 2, 3, 0, 1, 2
	p.GossipFactor = 0
	p.IDontWantMessageThreshold = 16 << 10
	return p
}

// peerScoreParams: app is the application-specific score (the flood
// penalty, see ratelimit.go, and strangers', see gate.go).
func peerScoreParams(app func(peer.ID) float64) *pubsub.PeerScoreParams {
	return &pubsub.PeerScoreParams{
		Topics:            map[string]*pubsub.TopicScoreParams{}, // set per org by JoinOrg
		TopicScoreCap:     100,
		AppSpecificScore:  app,
		AppSpecificWeight: 1,
		// Disabled: the machines of one office share a public IP behind NAT,
		// and in-process test meshes all share 127.0.0.1.
		IPColocationFactorWeight: 0,
		// Behaviour penalties (P7) count GRAFTs within a backoff, broken
		// IWANT promises and (10 at once) a repeated extensions message.
		// Machines that restart or reconnect earn them without misbehaving:
		// a restarted process forgets the backoffs its peers set, and a
		// writer GossipSub reopens on a surviving connection repeats its
		// hello. With GossipSub's usual threshold (6) and a 10-minute decay,
		// make chaos (sigterm-restart) saw restarted machines scored down
		// to -8000 by their peers: below the publish and graylist
		// thresholds, no gossip either way, offline to everyone, their
		// items run again. Members are authenticated and their floods are
		// limited (ratelimit.go), so only a sustained stream of protocol
		// faults is penalised: the count decays within a minute and costs
		// nothing below 100.
		BehaviourPenaltyWeight:    -10,
		BehaviourPenaltyThreshold: 100,
		BehaviourPenaltyDecay:     pubsub.ScoreParameterDecay(time.Minute),
		DecayInterval:             time.Second,
		DecayToZero:               0.01,
		RetainScore:               10 * time.Minute, // reconnecting does not wash a bad score
	}
}

// Thresholds: with InvalidMessageDeliveriesWeight -100 a sender's P4 term is
// -100·n² for n recent invalid messages: 3 stop our gossip to it, 4 our
// publishing to it, 5 and we ignore it altogether (graylist).
func peerScoreThresholds() *pubsub.PeerScoreThresholds {
	return &pubsub.PeerScoreThresholds{
		GossipThreshold:             -500,
		PublishThreshold:            -1000,
		GraylistThreshold:           -2400,
		AcceptPXThreshold:           10,
		OpportunisticGraftThreshold: 3,
	}
}

// topicScoreParams are used for both org topics: both are low-rate signal
// topics, so the mesh-delivery-rate penalty (P3) is off; time in mesh and
// first deliveries earn a little, invalid messages cost a lot.
func topicScoreParams() *pubsub.TopicScoreParams {
	return &pubsub.TopicScoreParams{
		SkipAtomicValidation:           true,
		TopicWeight:                    1,
		TimeInMeshWeight:               0.01,
		TimeInMeshQuantum:              time.Second,
		TimeInMeshCap:                  3600,
		FirstMessageDeliveriesWeight:   1,
		FirstMessageDeliveriesDecay:    pubsub.ScoreParameterDecay(10 * time.Minute),
		FirstMessageDeliveriesCap:      50,
		InvalidMessageDeliveriesWeight: -100,
		InvalidMessageDeliveriesDecay:  pubsub.ScoreParameterDecay(30 * time.Minute),
	}
}
