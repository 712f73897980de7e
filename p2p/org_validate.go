package p2p

import (
	"context"
	"errors"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/internal/edkey"
)

// The org topics' validators: what a heartbeat or a heads message must be
// to be delivered, and the counts of what was rejected or ignored.

func (o *Org) reject(kind, reason string) pubsub.ValidationResult {
	o.h.rejected.WithLabelValues(kind, reason).Inc()
	o.mu.Lock()
	o.rejected[kind+"/"+reason]++
	o.mu.Unlock()
	o.h.log.Debug("gossip message rejected", "org", o.name, "topic", kind, "reason", reason)
	return pubsub.ValidationReject
}

func (o *Org) ignore(kind, reason string) pubsub.ValidationResult {
	o.h.ignored.WithLabelValues(kind, reason).Inc()
	o.mu.Lock()
	o.ignored[kind+"/"+reason]++
	o.mu.Unlock()
	return pubsub.ValidationIgnore
}

func (o *Org) validateHeartbeat(_ context.Context, src peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	self := o.h.ID()
	local := src == self
	data := msg.GetData()
	if len(data) > MaxPayloadSize {
		return o.reject(KindHeartbeat, ReasonTooLarge)
	}
	hb, err := DecodeHeartbeat(data)
	if err != nil {
		return o.reject(KindHeartbeat, ReasonUndecodable)
	}
	key, err := edkey.OfID(hb.Machine)
	if err != nil {
		return o.reject(KindHeartbeat, ReasonUndecodable)
	}
	from := key.ID
	if from == self && !local {
		return pubsub.ValidationIgnore // our own message coming back (e.g. after a restart)
	}
	if !local && !o.m.IsApproved(from) {
		if la, ok := o.m.(LagAware); ok && !la.HasHeads(hb.Heads) {
			return o.ignore(KindHeartbeat, IgnoreLagging)
		}
		return o.reject(KindHeartbeat, ReasonNotApproved)
	}
	if err := hb.Verify(o.name); err != nil {
		if errors.Is(err, ErrUnsigned) {
			return o.reject(KindHeartbeat, ReasonUnsigned)
		}
		return o.reject(KindHeartbeat, ReasonBadSignature)
	}
	if !local && !o.hbRate.allow(hb.Machine, time.Now()) {
		return o.overRate(KindHeartbeat, from, msg)
	}
	o.seqMu.Lock()
	if last := o.hbSeq[hb.Machine]; hb.Seq <= last {
		o.seqMu.Unlock()
		if hb.Seq < last && last-hb.Seq < uint64(ReorderWindow) {
			return o.ignore(KindHeartbeat, IgnoreReordered)
		}
		return o.reject(KindHeartbeat, ReasonReplay)
	}
	o.hbSeq[hb.Machine] = hb.Seq
	o.seqMu.Unlock()
	msg.ValidatorData = hb
	o.h.accepted.WithLabelValues(KindHeartbeat).Inc()
	return pubsub.ValidationAccept
}

// overRate handles a message whose sender is over the topic's rate limit:
// ignored (a rejection would also cost every honest peer that forwarded a
// copy), and a strike against the sender when it delivered it itself (see
// floods).
func (o *Org) overRate(kind string, sender peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	if msg.ReceivedFrom == sender {
		o.h.floods.strike(sender, time.Now())
	}
	return o.ignore(kind, IgnoreRate)
}

// validateHeads checks a heads announcement. A stale one (Seq not above the
// last accepted from that sender) is ignored, not rejected: announcements
// are frequent and may overtake each other on different mesh paths, a
// rejection would punish the honest forwarder, and an old heads announcement
// is harmless (it names entries we already have).
func (o *Org) validateHeads(_ context.Context, src peer.ID, msg *pubsub.Message) pubsub.ValidationResult {
	self := o.h.ID()
	local := src == self
	hm, key, reason := decodeHeads(msg.GetData())
	if reason != "" {
		return o.reject(KindLedger, reason)
	}
	from := key.ID
	if from == self && !local {
		return pubsub.ValidationIgnore
	}
	if len(hm.Sig) == 0 {
		return o.reject(KindLedger, ReasonUnsigned)
	}
	if !local && !o.m.IsMachine(from) {
		if la, ok := o.m.(LagAware); ok && !la.HasHeadsPayload(hm.Payload) {
			return o.ignore(KindLedger, IgnoreLagging)
		}
		return o.reject(KindLedger, ReasonNotMachine)
	}
	if !local && isCapped(o.m, from) {
		return o.ignore(KindLedger, IgnoreCapped) // cap.go
	}
	if !local {
		sb, err := hm.signingBytes(o.name)
		if err != nil || !key.Verify(sb, hm.Sig) {
			return o.reject(KindLedger, ReasonBadSignature)
		}
	}
	if !local && !o.headsRate.allow(hm.From, time.Now()) {
		return o.overRate(KindLedger, from, msg)
	}
	o.seqMu.Lock()
	if hm.Seq <= o.ledgerSeq[from] {
		o.seqMu.Unlock()
		return o.ignore(KindLedger, IgnoreStale)
	}
	o.ledgerSeq[from] = hm.Seq
	o.seqMu.Unlock()
	msg.ValidatorData = headsDelivery{from: from, payload: hm.Payload}
	o.h.accepted.WithLabelValues(KindLedger).Inc()
	return pubsub.ValidationAccept
}

// subBuffer is how many accepted messages a topic's subscription holds for
// its loop (ledgerLoop, heartbeatLoop) before GossipSub drops the next ones
// (cshare_gossip_dropped_total{reason="subscriber_slow"}). A message dropped
// there has passed validation and is marked seen, so no other copy is
// delivered: a heads announcement's pushed entry then comes only through the
// slow repair path (a later heartbeat's heads, then a fetch), and a dropped
// heartbeat loses a machine's leases until its next one. A wave of heartbeats
// (a wide job starting on every machine of a large org) arrives while the
// loop waits for the ledger's lock; 256 overflowed at 100 machines on a busy
// host (600-700 drops over six placements of the placement benchmark). The
// buffer holds pointers and fills only under backlog.
const subBuffer = 4096
