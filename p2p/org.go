package p2p

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Membership answers from the node's current ledger State. It must be safe
// for concurrent use and fast (no IO, no waiting on locks held across IO):
// validators call it inline on pubsub's validation workers.
type Membership interface {
	// IsMachine: a registered machine of the org (pending or approved); may
	// announce ledger heads.
	IsMachine(id peer.ID) bool
	// IsApproved: an approved machine; may send heartbeats.
	IsApproved(id peer.ID) bool
}

// LagAware is optionally implemented by a Membership. A message from a peer
// the Membership does not list is then rejected (and its sender and
// forwarder penalised) only when this node has every ledger head the message
// names: the sender is then provably not a machine in the ledger it claims
// to have seen. When this node lacks one of those heads it may simply lag
// behind (a machine registered or approved a moment ago, announced by a
// forwarder that is ahead of us), and the message is ignored without
// penalty; penalising would graylist honest peers whenever ledgers are
// briefly out of step. Without LagAware every such message is rejected.
type LagAware interface {
	// HasHeads reports whether every head (a CID string, as in
	// Heartbeat.Heads) is in this node's ledger.
	HasHeads(heads []string) bool
	// HasHeadsPayload is HasHeads for the opaque payload of a heads
	// announcement; an undecodable payload counts as known.
	HasHeadsPayload(payload []byte) bool
}

// Topic kinds, used as the "topic" label of the gossip counters and as the
// prefix of Rejected's keys.
const (
	KindLedger    = "ledger"
	KindHeartbeat = "heartbeat"
)

// Rejection reasons (the "reason" label of cshare_gossip_rejected_total).
const (
	ReasonTooLarge     = "too_large"
	ReasonUndecodable  = "undecodable"   // not strict canonical CBOR of the schema
	ReasonUnsigned     = "unsigned"      // heartbeat or heads announcement without its signature
	ReasonBadSignature = "bad_signature" // its signature does not verify
	ReasonNotApproved  = "not_approved"  // heartbeat from a machine that is not approved
	ReasonNotMachine   = "not_machine"   // heads from a peer that is not a machine of the org
	ReasonReplay       = "replay"        // heartbeat Seq == last accepted, or older than it by more than ReorderWindow
)

// Reasons for ignoring (cshare_gossip_ignored_total): no penalty, not delivered.
const (
	IgnoreReordered = "reordered" // heartbeat Seq a little below the last accepted: overtaken on another path
	IgnoreStale     = "stale"     // heads Seq not above the last accepted from that sender
	IgnoreLagging   = "lagging"   // sender not a machine in our ledger, which lacks heads the message names (see LagAware)
	IgnoreRate      = "rate"      // forwarded by another peer while its sender is over the topic's rate limit
)

// ReorderWindow: a heartbeat whose Seq is below the last accepted one from
// its machine by less than this (Seq counts unix nanoseconds) is taken to be
// overtaken by its successor (another mesh path, or parallel validation) and
// ignored without penalty; one older than that is a replay and rejected.
// It is generous because a rejection also penalises the honest peer that
// forwarded a merely delayed heartbeat (IWANT from the message cache, or
// queues on a loaded host: delays of 5-20 s were seen with ten nodes on two
// busy cores), and a few such penalties graylist that peer for minutes,
// cutting its machines off; an ignored old heartbeat has no effect either.
const ReorderWindow = 30 * time.Second

// BeatMinGap is the least time between two beats triggered by peers joining
// the heartbeat topic (see SetBeat).
const BeatMinGap = time.Second

// Errors of the Org API.
var (
	ErrNotApproved = errors.New("p2p: this machine is not approved in the org: it may not send heartbeats")
	ErrNotMachine  = errors.New("p2p: this node is not a machine of the org: it may not announce heads")
	ErrOrgJoined   = errors.New("p2p: org already joined on this host")
	ErrClosed      = errors.New("p2p: closed")
)

// headsMsg is the data of a ledger-topic message: the sync layer's opaque
// payload with a per-sender sequence number, signed by the sender's machine
// key (pubsub's own signatures are off, see NewHost). The sequence makes
// every PublishHeads call a distinct message (content-hash IDs would
// otherwise swallow a periodic re-announcement of unchanged heads for the
// seen-cache TTL) and lets validators drop stale replays.
type headsMsg struct {
	Seq     uint64 `cbor:"seq"`
	Payload []byte `cbor:"payload"`
	From    string `cbor:"from"`
	Sig     []byte `cbor:"sig,omitempty"`
}

const headsSigDomain = "cshare-heads-v1\x00"

// signingBytes is what the sender signs: a domain tag, the org, and the
// canonical encoding of the message without its signature.
func (hm *headsMsg) signingBytes(org string) ([]byte, error) {
	c := *hm
	c.Sig = nil
	return signedBytes(headsSigDomain, org, &c)
}

// headsDelivery is what the ledger validator hands to ledgerLoop.
type headsDelivery struct {
	from    peer.ID
	payload []byte
}

type cachedHB struct {
	hb  Heartbeat
	raw []byte
	at  time.Time
}

// Org is this host's membership of one org's topics.
type Org struct {
	h      *Host
	name   string
	m      Membership
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	ledgerName, hbName   string
	ledgerTopic, hbTopic *pubsub.Topic
	ledgerSub, hbSub     *pubsub.Subscription
	events               *pubsub.TopicEventHandler
	regLedger, regHB     bool // validators registered by us

	mu        sync.Mutex
	headsFns  []func(peer.ID, []byte)
	hbFns     []func(Heartbeat)
	beat      func()
	beatTimer *time.Timer
	lastBeat  time.Time
	rejected  map[string]uint64
	ignored   map[string]uint64
	cache     map[string]cachedHB  // latest accepted heartbeat per machine
	joined    map[peer.ID]struct{} // peers that joined the heartbeat topic since the last beat
	closed    bool

	addrsCache []string
	addrsAt    time.Time

	seqMu     sync.Mutex
	hbSeq     map[string]uint64  // validator: last accepted heartbeat Seq per machine
	ledgerSeq map[peer.ID]uint64 // validator: last accepted heads Seq per sender
	hbRate    *limiter           // validator: heartbeats per machine
	headsRate *limiter           // validator: heads announcements per sender

	// Our own publications are serialised per topic so that Seq order is
	// local validation order.
	hbPubMu, headsPubMu sync.Mutex
	mySeq, myHeadSeq    uint64
}

// TopicLedger and TopicHeartbeat name an org's pubsub topics.
func TopicLedger(org string) string    { return "/cshare/" + org + "/ledger" }
func TopicHeartbeat(org string) string { return "/cshare/" + org + "/heartbeat" }

// JoinOrg joins the org's ledger and heartbeat topics with validators that
// consult m, and starts delivering accepted messages to the registered
// callbacks.
func (h *Host) JoinOrg(org string, m Membership) (*Org, error) {
	if org == "" || strings.ContainsAny(org, "/\x00") || len(org) > 256 {
		return nil, fmt.Errorf("p2p: invalid org ID %q", org)
	}
	if m == nil {
		return nil, errors.New("p2p: JoinOrg needs a Membership")
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	if _, ok := h.orgs[org]; ok {
		h.mu.Unlock()
		return nil, ErrOrgJoined
	}
	ctx, cancel := context.WithCancel(h.ctx)
	o := &Org{
		h: h, name: org, m: m, ctx: ctx, cancel: cancel,
		ledgerName: TopicLedger(org), hbName: TopicHeartbeat(org),
		rejected:  make(map[string]uint64),
		ignored:   make(map[string]uint64),
		cache:     make(map[string]cachedHB),
		joined:    make(map[peer.ID]struct{}),
		hbSeq:     make(map[string]uint64),
		ledgerSeq: make(map[peer.ID]uint64),
		hbRate:    newLimiter(HeartbeatRate),
		headsRate: newLimiter(HeadsRate),
	}
	h.orgs[org] = o
	h.mu.Unlock()

	if err := o.join(); err != nil {
		o.Close()
		return nil, err
	}
	o.wg.Add(3)
	go o.ledgerLoop()
	go o.heartbeatLoop()
	go o.eventLoop()
	return o, nil
}

func (o *Org) join() error {
	ps := o.h.ps
	var err error
	// Inline: validators are cheap (a map lookup, two Ed25519 checks at
	// most) and running them on pubsub's workers saves a goroutine per
	// message, which shows in propagation latency.
	if err = ps.RegisterTopicValidator(o.ledgerName, pubsub.ValidatorEx(o.validateHeads), pubsub.WithValidatorInline(true)); err != nil {
		return err
	}
	o.regLedger = true
	if err = ps.RegisterTopicValidator(o.hbName, pubsub.ValidatorEx(o.validateHeartbeat), pubsub.WithValidatorInline(true)); err != nil {
		return err
	}
	o.regHB = true
	if o.ledgerTopic, err = ps.Join(o.ledgerName); err != nil {
		return err
	}
	if o.hbTopic, err = ps.Join(o.hbName); err != nil {
		return err
	}
	for _, t := range []*pubsub.Topic{o.ledgerTopic, o.hbTopic} {
		if err = t.SetScoreParams(topicScoreParams()); err != nil {
			return err
		}
	}
	if o.ledgerSub, err = o.ledgerTopic.Subscribe(pubsub.WithBufferSize(subBuffer)); err != nil {
		return err
	}
	if o.hbSub, err = o.hbTopic.Subscribe(pubsub.WithBufferSize(subBuffer)); err != nil {
		return err
	}
	o.events, err = o.hbTopic.EventHandler()
	return err
}

// Name is the org ID.
func (o *Org) Name() string { return o.name }

// Peers are the connected peers subscribed to either of the org's topics,
// sorted: the machines this node gossips with for the org.
func (o *Org) Peers() []peer.ID {
	seen := map[peer.ID]bool{}
	var out []peer.ID
	for _, t := range []*pubsub.Topic{o.ledgerTopic, o.hbTopic} {
		if t == nil {
			continue
		}
		for _, p := range t.ListPeers() {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Close leaves the org's topics. Callbacks are not called after it returns.
func (o *Org) Close() {
	o.mu.Lock()
	if o.closed {
		o.mu.Unlock()
		return
	}
	o.closed = true
	if o.beatTimer != nil {
		o.beatTimer.Stop()
	}
	o.mu.Unlock()

	o.cancel()
	if o.ledgerSub != nil {
		o.ledgerSub.Cancel()
	}
	if o.hbSub != nil {
		o.hbSub.Cancel()
	}
	if o.events != nil {
		o.events.Cancel()
	}
	o.wg.Wait()
	ps := o.h.ps
	if o.regLedger {
		_ = ps.UnregisterTopicValidator(o.ledgerName)
	}
	if o.regHB {
		_ = ps.UnregisterTopicValidator(o.hbName)
	}
	if o.ledgerTopic != nil {
		_ = o.ledgerTopic.Close()
	}
	if o.hbTopic != nil {
		_ = o.hbTopic.Close()
	}
	o.h.mu.Lock()
	if o.h.orgs[o.name] == o {
		delete(o.h.orgs, o.name)
	}
	o.h.mu.Unlock()
}

// OnHeads registers fn for every valid heads announcement from another peer.
// Callbacks run on one goroutine per topic, in arrival order; a slow callback
// delays the next (and pubsub drops messages for a subscriber 256 behind).
func (o *Org) OnHeads(fn func(from peer.ID, payload []byte)) {
	o.mu.Lock()
	o.headsFns = append(o.headsFns, fn)
	o.mu.Unlock()
}

// OnHeartbeat registers fn for every accepted heartbeat, others' and our own.
func (o *Org) OnHeartbeat(fn func(hb Heartbeat)) {
	o.mu.Lock()
	o.hbFns = append(o.hbFns, fn)
	o.mu.Unlock()
}

// SetBeat registers the node's "publish my heartbeat now" function. Whenever
// a peer joins the org's heartbeat topic (a peer connected, or it restarted),
// Org calls fn so that the newcomer learns our state without waiting a full
// interval. Calls are coalesced: at most one per BeatMinGap, on a timer
// goroutine, and delayed (up to 3 s) until pubsub can actually send to the
// new peers. fn would normally build the current Heartbeat and call
// PublishHeartbeat. This is the only peer-connection hook: pubsub's PeerJoin
// on the heartbeat topic is a better trigger than a network notifee, since a
// heartbeat published before the peer's subscription is known would not
// reach it.
func (o *Org) SetBeat(fn func()) {
	o.mu.Lock()
	o.beat = fn
	o.mu.Unlock()
}

// Rejected returns the number of rejected messages by "<kind>/<reason>",
// e.g. "heartbeat/replay". It counts this Org only.
func (o *Org) Rejected() map[string]uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]uint64, len(o.rejected))
	for k, v := range o.rejected {
		out[k] = v
	}
	return out
}

// Ignored returns the number of messages ignored (dropped without penalty)
// by "<kind>/<reason>", e.g. "ledger/stale".
func (o *Org) Ignored() map[string]uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]uint64, len(o.ignored))
	for k, v := range o.ignored {
		out[k] = v
	}
	return out
}

// PublishHeads announces ledger heads on /cshare/<org>/ledger. payload is
// opaque here (the sync layer encodes it) and at most MaxPayloadSize bytes.
// Every call is a new message, even with an unchanged payload.
func (o *Org) PublishHeads(ctx context.Context, payload []byte) error {
	if len(payload) > MaxPayloadSize {
		return fmt.Errorf("%w: heads payload is %d bytes, limit %d", ErrTooLarge, len(payload), MaxPayloadSize)
	}
	if !o.m.IsMachine(o.h.ID()) {
		return ErrNotMachine
	}
	o.headsPubMu.Lock()
	defer o.headsPubMu.Unlock()
	o.myHeadSeq = nextSeq(o.myHeadSeq)
	data, err := EncodeHeads(o.name, o.h.key, o.myHeadSeq, payload)
	if err != nil {
		return err
	}
	return o.ledgerTopic.Publish(ctx, data)
}

// PublishHeartbeat signs and publishes hb on /cshare/<org>/heartbeat. It
// fills Machine, Seq (strictly increasing and, being seeded from the clock in
// unix nanoseconds, larger after a restart), Time if zero (unix ms now),
// Addrs if empty (Host.Addrs), and Sig. Our own heartbeat is also delivered
// to OnHeartbeat.
func (o *Org) PublishHeartbeat(ctx context.Context, hb Heartbeat) error {
	if !o.m.IsApproved(o.h.ID()) {
		return ErrNotApproved
	}
	hb.Machine = o.h.ID().String()
	if hb.Time == 0 {
		hb.Time = time.Now().UnixMilli()
	}
	if len(hb.Addrs) == 0 {
		hb.Addrs = o.addrs()
	}
	hb.Relay = o.h.RelayServing()
	o.hbPubMu.Lock()
	defer o.hbPubMu.Unlock()
	o.mySeq = nextSeq(o.mySeq)
	hb.Seq = o.mySeq
	if err := hb.Sign(o.name, o.h.key); err != nil {
		return err
	}
	data, err := EncodeHeartbeat(&hb)
	if err != nil {
		return err
	}
	if len(data) > MaxPayloadSize {
		return fmt.Errorf("%w: heartbeat is %d bytes, limit %d", ErrTooLarge, len(data), MaxPayloadSize)
	}
	return o.hbTopic.Publish(ctx, data)
}

// addrs is Host.Addrs, cached for addrsTTL (it enumerates interfaces).
func (o *Org) addrs() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if time.Since(o.addrsAt) > addrsTTL || len(o.addrsCache) == 0 {
		o.addrsCache, o.addrsAt = o.h.Addrs(), time.Now()
	}
	return o.addrsCache
}

const addrsTTL = 10 * time.Second

// nextSeq is max(now in unix ns, last+1).
func nextSeq(last uint64) uint64 {
	s := uint64(time.Now().UnixNano())
	if s <= last {
		s = last + 1
	}
	return s
}
