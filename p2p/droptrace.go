package p2p

import (
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
)

// Reasons of cshare_gossip_dropped_total: messages GossipSub dropped for
// want of room, not because a validator refused them.
const (
	DropValidationQueue = "validation_queue_full"
	DropThrottled       = "validation_throttled"
	DropOutbound        = "outbound_queue_full"
	DropUndeliverable   = "subscriber_slow"
)

// dropTracer counts the messages GossipSub drops under load. A drop is not
// an error (gossip repairs it, heartbeats carry heads) but it delays the
// org's view, so it is a metric an operator should see.
type dropTracer struct{ dropped *prometheus.CounterVec }

var _ pubsub.RawTracer = dropTracer{}

func (t dropTracer) RejectMessage(_ *pubsub.Message, reason string) {
	switch reason {
	case pubsub.RejectValidationQueueFull:
		t.dropped.WithLabelValues(DropValidationQueue).Inc()
	case pubsub.RejectValidationThrottled:
		t.dropped.WithLabelValues(DropThrottled).Inc()
	}
}
func (t dropTracer) DropRPC(*pubsub.RPC, peer.ID) { t.dropped.WithLabelValues(DropOutbound).Inc() }
func (t dropTracer) UndeliverableMessage(*pubsub.Message) {
	t.dropped.WithLabelValues(DropUndeliverable).Inc()
}

func (dropTracer) AddPeer(peer.ID, protocol.ID)     {}
func (dropTracer) RemovePeer(peer.ID)               {}
func (dropTracer) Join(string)                      {}
func (dropTracer) Leave(string)                     {}
func (dropTracer) Graft(peer.ID, string)            {}
func (dropTracer) Prune(peer.ID, string)            {}
func (dropTracer) ValidateMessage(*pubsub.Message)  {}
func (dropTracer) DeliverMessage(*pubsub.Message)   {}
func (dropTracer) DuplicateMessage(*pubsub.Message) {}
func (dropTracer) ThrottlePeer(peer.ID)             {}
func (dropTracer) RecvRPC(*pubsub.RPC)              {}
func (dropTracer) SendRPC(*pubsub.RPC, peer.ID)     {}

// Dropped returns how many gossip messages this host dropped for reason (one
// of the Drop* constants) since it started.
func (h *Host) Dropped(reason string) float64 { return counterValue(h.dropped, reason) }

// Accepted returns how many gossip messages of a topic kind (KindLedger or
// KindHeartbeat) this host's validators accepted since it started, its own
// included.
func (h *Host) Accepted(kind string) float64 { return counterValue(h.accepted, kind) }

func counterValue(c *prometheus.CounterVec, labels ...string) float64 {
	var m dto.Metric
	if err := c.WithLabelValues(labels...).Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
