package p2p

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
)

// KindOffer is the offers topic's kind (gossip counters' "topic" label).
const KindOffer = "offer"

// TopicOffers names an org's offers topic (issue 18): the market's offers,
// signed by their host machines, and their withdrawals.
func TopicOffers(org string) string { return "/cshare/" + org + "/" + kindOffers }

// kindOffers is the offers topic's kind (its last path element).
const kindOffers = "offers"

// OfferMsg is one message on the offers topic: an offer or the withdrawal of
// one, each signed by its host machine. Seq (the publisher's, unsigned)
// makes every republication a distinct message, which content-hash message
// IDs would otherwise swallow within the seen-cache's lifetime; a replayed
// offer is harmless, since the offer carries its own signature and end.
type OfferMsg struct {
	Seq      uint64                  `cbor:"seq"`
	Offer    *ledger.SignedOffer     `cbor:"offer,omitempty"`
	Withdraw *ledger.OfferWithdrawal `cbor:"withdraw,omitempty"`
}

// OfferVerdict is an OfferCheck's answer for a message that is not
// accepted: the reason (the counters' label) and whether to ignore it
// without penalty (an expired offer, a machine this node may lag behind on)
// rather than reject it.
type OfferVerdict struct {
	Reason string
	Ignore bool
}

// OfferCheck checks a decoded message against the node's view (signature,
// org, an approved machine that has the resources, expiry). nil accepts.
// It runs inline on pubsub's validation workers: it must be fast.
type OfferCheck func(from peer.ID, m *OfferMsg) *OfferVerdict

// Offers is this host's membership of one org's offers topic.
type Offers struct {
	h      *Host
	name   string
	check  OfferCheck
	rate   *limiter // per delivering peer
	topic  *pubsub.Topic
	sub    *pubsub.Subscription
	reg    bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	fns   []func(OfferMsg)
	joins []func(peer.ID)
	seq   uint64
	done  bool
}

// JoinOffers joins org's offers topic, with a validator that decodes each
// message strictly, caps its size, and asks check.
func (h *Host) JoinOffers(org string, check OfferCheck) (*Offers, error) {
	if org == "" || strings.ContainsAny(org, "/\x00") || len(org) > 256 {
		return nil, fmt.Errorf("p2p: invalid org ID %q", org)
	}
	if check == nil {
		return nil, errors.New("p2p: JoinOffers needs a check")
	}
	ctx, cancel := context.WithCancel(h.ctx)
	t := &Offers{h: h, name: TopicOffers(org), check: check, ctx: ctx, cancel: cancel, rate: newLimiter(OfferRate)}
	var err error
	if err = h.ps.RegisterTopicValidator(t.name, pubsub.ValidatorEx(t.validate), pubsub.WithValidatorInline(true)); err != nil {
		t.Close()
		return nil, err
	}
	t.reg = true
	if t.topic, err = h.ps.Join(t.name); err != nil {
		t.Close()
		return nil, err
	}
	if err = t.topic.SetScoreParams(topicScoreParams()); err != nil {
		t.Close()
		return nil, err
	}
	if t.sub, err = t.topic.Subscribe(pubsub.WithBufferSize(subBuffer)); err != nil {
		t.Close()
		return nil, err
	}
	ev, err := t.topic.EventHandler()
	if err != nil {
		t.Close()
		return nil, err
	}
	t.wg.Add(2)
	go t.loop()
	go t.peerLoop(ev)
	return t, nil
}

// OnPeerJoin registers fn for every peer that subscribes to the topic
// (a newcomer, or a peer back after a disconnection): the node sends it
// its offers at once rather than at its next republication.
func (t *Offers) OnPeerJoin(fn func(peer.ID)) {
	t.mu.Lock()
	t.joins = append(t.joins, fn)
	t.mu.Unlock()
}

func (t *Offers) peerLoop(ev *pubsub.TopicEventHandler) {
	defer t.wg.Done()
	defer ev.Cancel()
	for {
		e, err := ev.NextPeerEvent(t.ctx)
		if err != nil {
			return
		}
		if e.Type != pubsub.PeerJoin {
			continue
		}
		t.mu.Lock()
		fns := t.joins
		t.mu.Unlock()
		for _, fn := range fns {
			fn(e.Peer)
		}
	}
}

// OnMessage registers fn for every accepted message, others' and our own.
func (t *Offers) OnMessage(fn func(OfferMsg)) {
	t.mu.Lock()
	t.fns = append(t.fns, fn)
	t.mu.Unlock()
}

// Publish sends m (its Seq set here).
func (t *Offers) Publish(ctx context.Context, m OfferMsg) error {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return ErrClosed
	}
	t.seq = nextSeq(t.seq)
	m.Seq = t.seq
	t.mu.Unlock()
	data, err := gossipEnc.Marshal(m)
	if err != nil {
		return err
	}
	if len(data) > MaxPayloadSize {
		return fmt.Errorf("%w: offer message is %d bytes, limit %d", ErrTooLarge, len(data), MaxPayloadSize)
	}
	return t.topic.Publish(ctx, data)
}

// Peers are the connected peers subscribed to the topic.
func (t *Offers) Peers() []peer.ID { return t.topic.ListPeers() }

// Close leaves the topic. Callbacks are not called after it returns.
func (t *Offers) Close() {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	t.done = true
	t.mu.Unlock()
	t.cancel()
	if t.sub != nil {
		t.sub.Cancel()
	}
	t.wg.Wait()
	if t.reg {
		_ = t.h.ps.UnregisterTopicValidator(t.name)
	}
	if t.topic != nil {
		_ = t.topic.Close()
	}
}

func (t *Offers) validate(_ context.Context, src peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	data := msg.GetData()
	if len(data) > MaxPayloadSize {
		return t.reject(ReasonTooLarge)
	}
	var m OfferMsg
	if err := gossipDec.Unmarshal(data, &m); err != nil || m.Seq == 0 || (m.Offer == nil) == (m.Withdraw == nil) {
		return t.reject(ReasonUndecodable)
	}
	if src != t.h.ID() && !t.rate.allow(string(src), time.Now()) {
		// Per delivering peer, without penalty: it may be forwarding
		// another's offers.
		t.h.ignored.WithLabelValues(KindOffer, IgnoreRate).Inc()
		return pubsub.ValidationIgnore
	}
	if v := t.check(src, &m); v != nil {
		if v.Ignore {
			t.h.ignored.WithLabelValues(KindOffer, v.Reason).Inc()
			return pubsub.ValidationIgnore
		}
		return t.reject(v.Reason)
	}
	msg.ValidatorData = m
	t.h.accepted.WithLabelValues(KindOffer).Inc()
	return pubsub.ValidationAccept
}

func (t *Offers) reject(reason string) pubsub.ValidationResult {
	t.h.rejected.WithLabelValues(KindOffer, reason).Inc()
	t.h.log.Debug("gossip message rejected", "topic", KindOffer, "reason", reason)
	return pubsub.ValidationReject
}

func (t *Offers) loop() {
	defer t.wg.Done()
	for {
		msg, err := t.sub.Next(t.ctx)
		if err != nil {
			return
		}
		m, ok := msg.ValidatorData.(OfferMsg)
		if !ok {
			continue
		}
		t.mu.Lock()
		fns := t.fns
		t.mu.Unlock()
		for _, fn := range fns {
			fn(m)
		}
	}
}
