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
type dropTracer struct {
	self    peer.ID
	dropped *prometheus.CounterVec
	traffic *traffic
	hook    TraceHook // may be nil
	writers *psPeers  // may be nil
}

// Trace events passed to a TraceHook.
const (
	TraceValidate   = "validate"    // a message entered validation
	TraceDeliver    = "deliver"     // an accepted message was handed to our subscriber
	TracePeerAdd    = "peer_add"    // a peer's pubsub stream opened
	TracePeerRemove = "peer_remove" // a peer's pubsub stream was lost
)

// TraceHook sees a host's GossipSub events (Config.Trace): the host
// (self), the event, and for messages their topic and data. It is for
// benchmarks and diagnosis, and must be fast.
type TraceHook func(self peer.ID, event, topic string, data []byte)

func (t dropTracer) trace(event string, m *pubsub.Message) {
	if t.hook == nil {
		return
	}
	if m == nil {
		t.hook(t.self, event, "", nil)
		return
	}
	t.hook(t.self, event, m.GetTopic(), m.GetData())
}

// traffic counts GossipSub RPCs and messages by direction: the per-machine
// cost of an org's gossip, which grows with the org's size.
type traffic struct {
	rpcsIn, rpcsOut, dups, ihaves prometheus.Counter
}

func newTraffic(reg prometheus.Registerer) *traffic {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cshare_gossip_rpcs_total",
		Help: "GossipSub RPCs (frames of messages and control) sent and received, by direction.",
	}, []string{"dir"})
	dups := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cshare_gossip_duplicates_total",
		Help: "Gossip messages received again after a first copy (the redundancy of the mesh).",
	})
	ihaves := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "cshare_gossip_ihave_sent_total",
		Help: "IHAVE announcements (lazy gossip) sent.",
	})
	if reg != nil {
		vec = registerOrExisting(reg, vec)
		dups = registerOrExisting(reg, dups)
		ihaves = registerOrExisting(reg, ihaves)
	}
	return &traffic{rpcsIn: vec.WithLabelValues("in"), rpcsOut: vec.WithLabelValues("out"), dups: dups, ihaves: ihaves}
}

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

func (t dropTracer) AddPeer(p peer.ID, _ protocol.ID) {
	if t.writers != nil {
		t.writers.set(p, true)
	}
	t.trace(TracePeerAdd, nil)
}
func (t dropTracer) RemovePeer(p peer.ID) {
	if t.writers != nil {
		t.writers.set(p, false)
	}
	t.trace(TracePeerRemove, nil)
}
func (dropTracer) Join(string)                         {}
func (dropTracer) Leave(string)                        {}
func (dropTracer) Graft(peer.ID, string)               {}
func (dropTracer) Prune(peer.ID, string)               {}
func (t dropTracer) ValidateMessage(m *pubsub.Message) { t.trace(TraceValidate, m) }
func (t dropTracer) DeliverMessage(m *pubsub.Message)  { t.trace(TraceDeliver, m) }
func (t dropTracer) DuplicateMessage(*pubsub.Message)  { t.traffic.dups.Inc() }
func (dropTracer) ThrottlePeer(peer.ID)                {}
func (t dropTracer) RecvRPC(*pubsub.RPC)               { t.traffic.rpcsIn.Inc() }
func (t dropTracer) SendRPC(r *pubsub.RPC, _ peer.ID) {
	t.traffic.rpcsOut.Inc()
	if c := r.GetControl(); c != nil && len(c.GetIhave()) > 0 {
		t.traffic.ihaves.Inc()
	}
}

// Dropped returns how many gossip messages this host dropped for reason (one
// of the Drop* constants) since it started.
func (h *Host) Dropped(reason string) float64 { return counterValue(h.dropped, reason) }

// Traffic returns the GossipSub RPCs this host received and sent, the
// duplicate messages it received, and the RPCs carrying IHAVE it sent, since
// it started.
func (h *Host) Traffic() (in, out, dups, ihaves float64) {
	t := h.traffic
	return counterOf(t.rpcsIn), counterOf(t.rpcsOut), counterOf(t.dups), counterOf(t.ihaves)
}

// Accepted returns how many gossip messages of a topic kind (KindLedger or
// KindHeartbeat) this host's validators accepted since it started, its own
// included.
func (h *Host) Accepted(kind string) float64 { return counterValue(h.accepted, kind) }

func counterValue(c *prometheus.CounterVec, labels ...string) float64 {
	return counterOf(c.WithLabelValues(labels...))
}

// counterOf reads a counter's value.
func counterOf(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
