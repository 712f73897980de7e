package node

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cshare/cshare/node/api"
)

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

// usageFigures are org usage (from the org's creation to now) and org
// show's totals, as the API gives them; ok is false in no org.
type usageFigures func() (u api.OrgUsage, t api.OrgTotals, ok bool)

// usageCollector exports, at each scrape, the figures of `org usage` (from
// the org's creation) per person and per machine as counters, and org
// show's totals as gauges (and its CPU-seconds as a counter): the same
// numbers the CLI prints, from the ledger.
type usageCollector struct {
	read    usageFigures
	person  map[string]*prometheus.Desc
	machine map[string]*prometheus.Desc
	totals  map[string]*prometheus.Desc
}

// The usage series: name -> help.
var (
	personSeries = map[string]string{
		"cshare_usage_cpu_seconds_total":          "CPU-seconds of runs (cores asked, one when none), by person.",
		"cshare_usage_gpu_seconds_total":          "GPU-seconds of runs, by person.",
		"cshare_usage_memory_mib_seconds_total":   "Memory MiB-seconds of runs, by person.",
		"cshare_usage_items_done_total":           "Items done, by submitter.",
		"cshare_usage_items_failed_total":         "Items failed for good, by submitter.",
		"cshare_usage_jobs_total":                 "Jobs submitted, by person.",
		"cshare_usage_dataset_bytes":              "Bytes of datasets held now, by owner.",
		"cshare_usage_dataset_byte_seconds_total": "Byte-seconds of datasets held, by owner.",
		"cshare_usage_contract_spend_usd_total":   "Dollars contracts cost their renter, by person.",
		"cshare_usage_contract_earned_usd_total":  "Dollars contracts earned their host, by person.",
	}
	machineSeries = map[string]string{
		"cshare_machine_cpu_seconds_total": "CPU-seconds of runs, by machine.",
		"cshare_machine_gpu_seconds_total": "GPU-seconds of runs, by machine.",
	}
	totalSeries = map[string]string{
		"cshare_org_machines":               "Approved machines of the org.",
		"cshare_org_available_cpus":         "CPUs the online machines have free for new jobs.",
		"cshare_org_available_memory_bytes": "Memory (bytes) the online machines have free for new jobs.",
		"cshare_org_available_gpus":         "GPUs the online machines have free for new jobs.",
		"cshare_org_active_jobs":            "Active jobs that may run (not queued by a policy).",
		"cshare_org_cpu_seconds_total":      "CPU-seconds of every run the ledger knows.",
	}
)

func registerUsageMetrics(reg prometheus.Registerer, read usageFigures) {
	c := &usageCollector{read: read, person: map[string]*prometheus.Desc{}, machine: map[string]*prometheus.Desc{}, totals: map[string]*prometheus.Desc{}}
	for n, h := range personSeries {
		c.person[n] = prometheus.NewDesc(n, h, []string{"person"}, nil)
	}
	for n, h := range machineSeries {
		c.machine[n] = prometheus.NewDesc(n, h, []string{"machine"}, nil)
	}
	for n, h := range totalSeries {
		c.totals[n] = prometheus.NewDesc(n, h, nil, nil)
	}
	reg.MustRegister(c)
}

// Describe implements prometheus.Collector.
func (c *usageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range []map[string]*prometheus.Desc{c.person, c.machine, c.totals} {
		for _, d := range m {
			ch <- d
		}
	}
}

// Collect implements prometheus.Collector.
func (c *usageCollector) Collect(ch chan<- prometheus.Metric) {
	u, t, ok := c.read()
	if !ok {
		return
	}
	kind := func(name string) prometheus.ValueType {
		if strings.HasSuffix(name, "_total") {
			return prometheus.CounterValue
		}
		return prometheus.GaugeValue
	}
	for _, p := range u.Persons {
		x := p.UsageTotals
		for n, v := range map[string]float64{
			"cshare_usage_cpu_seconds_total": x.CPUSeconds, "cshare_usage_gpu_seconds_total": x.GPUSeconds,
			"cshare_usage_memory_mib_seconds_total": x.MemoryMiBSeconds, "cshare_usage_items_done_total": float64(x.ItemsDone),
			"cshare_usage_items_failed_total": float64(x.ItemsFailed), "cshare_usage_jobs_total": float64(x.Jobs),
			"cshare_usage_dataset_bytes": float64(x.DatasetBytes), "cshare_usage_dataset_byte_seconds_total": float64(x.DatasetByteSeconds),
			"cshare_usage_contract_spend_usd_total": x.ContractSpendUSD, "cshare_usage_contract_earned_usd_total": x.ContractEarnedUSD,
		} {
			ch <- prometheus.MustNewConstMetric(c.person[n], kind(n), v, p.ID)
		}
	}
	for _, m := range u.Machines {
		ch <- prometheus.MustNewConstMetric(c.machine["cshare_machine_cpu_seconds_total"], prometheus.CounterValue, m.CPUSeconds, m.ID)
		ch <- prometheus.MustNewConstMetric(c.machine["cshare_machine_gpu_seconds_total"], prometheus.CounterValue, m.GPUSeconds, m.ID)
	}
	for n, v := range map[string]float64{
		"cshare_org_machines": float64(t.Machines), "cshare_org_available_cpus": t.AvailableCPUs,
		"cshare_org_available_memory_bytes": float64(t.AvailableMemoryMB) * (1 << 20), "cshare_org_available_gpus": float64(t.AvailableGPUs),
		"cshare_org_active_jobs": float64(t.ActiveJobs), "cshare_org_cpu_seconds_total": t.CPUSeconds,
	} {
		ch <- prometheus.MustNewConstMetric(c.totals[n], kind(n), v)
	}
}

// linted is the node's registry as /metrics serves it: libp2p's series
// under names that follow Prometheus's conventions (promtool check
// metrics): a counter ends in _total, nothing else does, and only
// histograms and summaries end in _count. cshare's own series are named so
// already.
type linted struct{ prometheus.Gatherer }

// Gather implements prometheus.Gatherer.
func (g linted) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := g.Gatherer.Gather()
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "libp2p_") {
			continue
		}
		switch t := mf.GetType(); {
		case t == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total"):
			name += "_total"
		case t != dto.MetricType_COUNTER && strings.HasSuffix(name, "_total"):
			name = strings.TrimSuffix(name, "_total")
		}
		if t := mf.GetType(); t != dto.MetricType_HISTOGRAM && t != dto.MetricType_SUMMARY && strings.HasSuffix(name, "_count") {
			name = strings.TrimSuffix(name, "_count") + "_number"
		}
		mf.Name = &name
	}
	return mfs, err
}
