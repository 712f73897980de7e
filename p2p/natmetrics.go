package p2p

import (
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	pbv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/pb"
	relayv2 "github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
)

// natMetrics are the metrics of NAT traversal (nat.go):
//
//	cshare_connections{path="direct|relayed"}       connected peers by the path of their best connection
//	cshare_holepunch_total{result="success|failure"} hole punches this host took part in, by outcome
//	cshare_relay_reservations_total{result="accepted|refused"} reservations asked of this host's relay
//	cshare_relay_reservations                        reservations this host's relay holds now
//
// They wrap libp2p's own holepunch and relay metrics (libp2p_holepunch_*,
// libp2p_relaysvc_*), which are registered as well when the host has a
// registry.
type natMetrics struct {
	punches      *prometheus.CounterVec
	reservations *prometheus.CounterVec
	active       prometheus.Gauge
	punchInner   holepunch.MetricsTracer
	relayInner   relayv2.MetricsTracer
}

func newNATMetrics(h *Host, reg prometheus.Registerer) *natMetrics {
	m := &natMetrics{
		punches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cshare_holepunch_total",
			Help: "Hole punches (DCUtR) this machine took part in, to turn a relayed connection into a direct one, by result.",
		}, []string{"result"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cshare_relay_reservations_total",
			Help: "Relay reservations asked of this machine's relay, by result (refused: not an approved machine of the org, or over the relay's caps).",
		}, []string{"result"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cshare_relay_reservations",
			Help: "Relay reservations this machine's relay holds now.",
		}),
	}
	if reg == nil {
		return m
	}
	m.punches = registerOrExisting(reg, m.punches)
	m.reservations = registerOrExisting(reg, m.reservations)
	m.active = registerOrExisting(reg, m.active)
	for _, path := range []string{PathDirect, PathRelayed} {
		registerOrExisting(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "cshare_connections",
			Help:        "Connected peers by the path of their best connection: direct, or through a relay.",
			ConstLabels: prometheus.Labels{"path": path},
		}, func() float64 {
			n := 0
			for _, c := range h.Connections() {
				if c.Path == path {
					n++
				}
			}
			return float64(n)
		}))
	}
	m.punchInner = holepunch.NewMetricsTracer(holepunch.WithRegisterer(reg))
	m.relayInner = relayv2.NewMetricsTracer(relayv2.WithRegisterer(reg))
	return m
}

// HolePunchFinished implements holepunch.MetricsTracer: a punch ended,
// with a direct connection or none.
func (m *natMetrics) HolePunchFinished(side string, n int, theirs, ours []ma.Multiaddr, direct network.ConnMultiaddrs) {
	if direct != nil {
		m.punches.WithLabelValues("success").Inc()
	} else {
		m.punches.WithLabelValues("failure").Inc()
	}
	if m.punchInner != nil {
		m.punchInner.HolePunchFinished(side, n, theirs, ours, direct)
	}
}

// DirectDialFinished implements holepunch.MetricsTracer.
func (m *natMetrics) DirectDialFinished(success bool) {
	if m.punchInner != nil {
		m.punchInner.DirectDialFinished(success)
	}
}

// punchFailed counts a punch that failed before it began (the two could
// not agree on addresses: one side has no public address).
func (m *natMetrics) punchFailed() { m.punches.WithLabelValues("failure").Inc() }

// relayTracer is the relay service's metrics tracer.
func (m *natMetrics) relayTracer() relayv2.MetricsTracer { return relayMetrics{m} }

type relayMetrics struct{ m *natMetrics }

func (r relayMetrics) RelayStatus(enabled bool) {
	if r.m.relayInner != nil {
		r.m.relayInner.RelayStatus(enabled)
	}
}

func (r relayMetrics) ConnectionOpened() {
	if r.m.relayInner != nil {
		r.m.relayInner.ConnectionOpened()
	}
}

func (r relayMetrics) ConnectionClosed(d time.Duration) {
	if r.m.relayInner != nil {
		r.m.relayInner.ConnectionClosed(d)
	}
}

func (r relayMetrics) ConnectionRequestHandled(status pbv2.Status) {
	if r.m.relayInner != nil {
		r.m.relayInner.ConnectionRequestHandled(status)
	}
}

func (r relayMetrics) ReservationAllowed(isRenewal bool) {
	if !isRenewal {
		r.m.active.Inc()
	}
	if r.m.relayInner != nil {
		r.m.relayInner.ReservationAllowed(isRenewal)
	}
}

func (r relayMetrics) ReservationClosed(cnt int) {
	r.m.active.Sub(float64(cnt))
	if r.m.relayInner != nil {
		r.m.relayInner.ReservationClosed(cnt)
	}
}

func (r relayMetrics) ReservationRequestHandled(status pbv2.Status) {
	if status == pbv2.Status_OK {
		r.m.reservations.WithLabelValues("accepted").Inc()
	} else {
		r.m.reservations.WithLabelValues("refused").Inc()
	}
	if r.m.relayInner != nil {
		r.m.relayInner.ReservationRequestHandled(status)
	}
}

func (r relayMetrics) BytesTransferred(cnt int) {
	if r.m.relayInner != nil {
		r.m.relayInner.BytesTransferred(cnt)
	}
}
