package node

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	entries    prometheus.Gauge
	dropped    *prometheus.CounterVec
	heartbeats prometheus.Counter
	started    prometheus.Counter
	preempted  *prometheus.CounterVec
	planHash   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		entries: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cshare_ledger_entries", Help: "Entries in this node's ledger DAG."}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cshare_ledger_dropped_total",
			Help: "Ledger input dropped or kept without effect, by reason (invalid, no_effect, bad_block, bad_heads)."}, []string{"reason"}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{Name: "cshare_heartbeats_received_total", Help: "Accepted heartbeats."}),
		started:    prometheus.NewCounter(prometheus.CounterOpts{Name: "cshare_runs_started_total", Help: "Agenda item runs started on this machine."}),
		preempted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cshare_preemptions_total",
			Help: "Instances on this machine preempted, by mode."}, []string{"mode"}),
		planHash: prometheus.NewGauge(prometheus.GaugeOpts{Name: "cshare_plan_instances", Help: "Instances in the current plan, org-wide."}),
	}
	reg.MustRegister(m.entries, m.dropped, m.heartbeats, m.started, m.preempted, m.planHash)
	for _, r := range []string{"invalid", "no_effect", "bad_block", "bad_heads"} {
		m.dropped.WithLabelValues(r)
	}
	return m
}

// registerRunMetrics exports the runs the org's ledger knows of, summed
// over every job: all of them, and the duplicates (runs of items already
// counted). The ledger only grows, so both only grow.
func registerRunMetrics(reg prometheus.Registerer, runs func() (all, dups int64)) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cshare_item_runs_total",
			Help: "Runs of agenda items whose results reached the ledger, org-wide."}, func() float64 { a, _ := runs(); return float64(a) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cshare_item_duplicate_runs_total",
			Help: "Runs of agenda items the ledger had already counted (work done twice), org-wide."}, func() float64 { _, d := runs(); return float64(d) }),
	)
}
