//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// What the nodes say of a job (`job show --json`, `job items --json`).
type jobInfo struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	State string `json:"state"`
	Range string `json:"range"`
	GPUs  int64  `json:"gpus"`
	Items struct {
		Total, Done, Failed, Running, Pending int64
	} `json:"items"`
	DuplicateRuns int64 `json:"duplicate_runs"`
	Instances     []struct {
		Machine string `json:"machine"`
		State   string `json:"state"`
	} `json:"instances"`
}

type ledgerRun struct {
	Machine  string `json:"machine"`
	Instance string `json:"instance"`
	Start    string `json:"start"`
	End      string `json:"end"`
	ExitCode int64  `json:"exit_code"`
	Counted  bool   `json:"counted"`
	Stopped  bool   `json:"stopped"`
}

type itemInfo struct {
	Item     int64       `json:"item"`
	Status   string      `json:"status"`
	Attempts int64       `json:"attempts"`
	Machine  string      `json:"machine"`
	Runs     []ledgerRun `json:"runs"`
}

func ended(state string) bool { return state == "done" || state == "failed" || state == "cancelled" }

// report is the run's summary.
type report struct {
	nodes                int // at the end, with the one that joined
	duration, hb         time.Duration
	seed                 uint64
	submits, submitFails int
	jobs, items          int
	realRuns, retries    int
	gpuRuns              int // real runs that held a GPU
	gpuJobs              int // jobs that ask GPUs
	extraForced          int
	forcedBy             map[string]int // extraForced by the kind of fault that forced them
	afterStop            int
	faults               []*fault
	convergeHeal         time.Duration
	convergeHealOK       bool
	drained              time.Duration
	convergeEnd          time.Duration
	violations           []string
	paths                *pathCount // the node behind a NAT, nil for none
	joined               *joined    // the node that joined from a checkpoint
}

func (r *report) violate(format string, a ...any) {
	r.violations = append(r.violations, fmt.Sprintf(format, a...))
}

func (r *report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "chaos summary: %d nodes, %s of faults, heartbeat %s, seed %d\n", r.nodes, r.duration, r.hb, r.seed)
	if r.paths != nil {
		fmt.Fprintf(&b, "%s\n", r.paths)
	}
	if r.joined != nil {
		fmt.Fprintf(&b, "%s\n", r.joined)
	}
	fmt.Fprintf(&b, "operations: %d job submits (%d got no answer or an error: node paused, killed or cut off), %d jobs in the ledger, %d items, %d real runs on the host (%d retries of items failed on purpose, %d runs after a run stopped (preempted) as job items record, %d extra runs forced by a partition, a pause or a kill -9 of the machine that ran the item first: %s)\n",
		r.submits, r.submitFails, r.jobs, r.items, r.realRuns, r.retries, r.afterStop, r.extraForced, r.forcedByString())
	byKind := map[string]int{}
	for _, f := range r.faults {
		byKind[f.kind]++
	}
	fmt.Fprintf(&b, "faults injected: %d:", len(r.faults)-byKind[stallSeen])
	for _, k := range faultKinds {
		fmt.Fprintf(&b, " %s=%d", k, byKind[k])
	}
	if byKind[faultTerm] > 0 {
		fmt.Fprintf(&b, " %s=%d", faultTerm, byKind[faultTerm])
	}
	fmt.Fprintf(&b, "\nstalls the nodes logged themselves (\"this node was not running for a while\": the host starved them; counted as pauses): %d\n", byKind[stallSeen])
	ok := "within"
	if !r.convergeHealOK {
		ok = "NOT within"
	}
	fmt.Fprintf(&b, "time to converge after healing: %s (%s 3 heartbeat intervals = %s); all jobs ended %s after healing; quiescent convergence %s after that\n",
		r.convergeHeal.Round(time.Millisecond), ok, 3*r.hb, r.drained.Round(time.Millisecond), r.convergeEnd.Round(time.Millisecond))
	fmt.Fprintf(&b, "GPU exclusivity: %d GPU runs checked (%d jobs, one in %d, asked 1 GPU per instance of the 2 each node records; a run's GPUs are its CUDA_VISIBLE_DEVICES in the run log): no two runs on one machine held one GPU at once, every run held as many as its job asks\n",
		r.gpuRuns, r.gpuJobs, gpuEvery)
	fmt.Fprintf(&b, "violations: %d\n", len(r.violations))
	for _, v := range r.violations {
		fmt.Fprintf(&b, "  VIOLATION %s\n", v)
	}
	return b.String()
}

// forcedByString lists the extra runs forced by each kind of fault.
func (r *report) forcedByString() string {
	var s []string
	for _, k := range []string{"partition", faultPause, stallSeen, faultKill} {
		s = append(s, fmt.Sprintf("%s=%d", k, r.forcedBy[k]))
	}
	return strings.Join(s, " ")
}

// forced says whether a partition, or a pause of one of machines, was on
// between from and to (with slack after it healed); or a kill -9 of the
// first of machines (the one that ran the item first): a killed machine
// is offline to the others until it has restarted and sent a heartbeat,
// its leases lapse with it (docs/design.md §9), and the run it had
// started goes on without it (an exec run is a session of its own, a
// container outlives its node) until the restarted node adopts it
// (§3.4). So another machine may run the item meanwhile, as after a
// partition; the ledger records both runs. (The nemesis saw it when a
// kill came 2 ms after an item started, before any heartbeat had
// announced it, and the restart took longer than the others' liveness
// window of two intervals on a loaded host.)
//
// It returns the kind of the fault that forced it ("partition" for any
// partition), "" for none; a partition first, then the first fault in
// faults' order.
func forced(faults []*fault, machines map[string]int, from, to time.Time, slack time.Duration, ms ...string) string {
	why := ""
	for _, f := range faults {
		end := f.end
		if end.IsZero() {
			end = time.Now()
		}
		if f.start.After(to) || end.Add(slack).Before(from) {
			continue
		}
		if f.partition() {
			return "partition"
		}
		for k, m := range ms {
			i, ok := machines[m]
			if !ok || i != f.nodes[0] || why != "" {
				continue
			}
			if f.kind == faultPause || f.kind == stallSeen || f.kind == faultKill && k == 0 {
				why = f.kind
			}
		}
	}
	return why
}

// jobRange parses "1-N" (or "N") into its item count.
func jobRange(s string) int64 {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	x, _ := strconv.ParseInt(a, 10, 64)
	y, _ := strconv.ParseInt(b, 10, 64)
	return y - x + 1
}

// checkLedgers asserts, from every node's ledger and the host's run log,
// the run's invariants; it records violations in r.
func checkLedgers(r *report, ns []*node, runs map[jobItem][]*hostRun, submitted map[string]submission, faults []*fault, hb time.Duration) {
	const d = 30 * time.Second
	machines, names := map[string]int{}, map[string]string{}
	for _, n := range ns {
		machines[n.id], names[n.id] = n.i, n.name
	}
	jobs := map[string]bool{}
	for id := range submitted {
		jobs[id] = true
	}
	for ji := range runs {
		jobs[ji.job] = true
	}
	lists := make([][]jobInfo, len(ns))
	for i, n := range ns {
		if err := n.json(d, &lists[i], "job", "ls"); err != nil {
			r.violate("%v", err)
			continue
		}
		for _, j := range lists[i] {
			jobs[j.ID] = true
		}
	}
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	r.jobs = len(ids)
	for _, id := range ids {
		var views [][]itemInfo
		var gpus int64 // per instance, as the first node says
		for _, n := range ns {
			var j jobInfo
			if err := n.json(d, &j, "job", "show", id); err != nil {
				r.violate("job %s: %v", id, err)
				continue
			}
			var items []itemInfo
			if err := n.json(d, &items, "job", "items", id); err != nil {
				// A node that joined from a checkpoint after the job left
				// the ledger's State has no items of it (docs/design.md
				// §5.7): the others' are checked.
				if !strings.Contains(err.Error(), "kept only on the machines that were members") {
					r.violate("job %s: %v", id, err)
				}
				continue
			}
			views = append(views, items)
			total := jobRange(j.Range)
			want, known := submitted[id]
			if known && total != want.items {
				r.violate("job %s on %s: range %s, submitted with %d items", id, n.name, j.Range, want.items)
			}
			if !ended(j.State) {
				r.violate("job %s on %s: not ended: %s", id, n.name, j.State)
			} else if j.State != "done" {
				r.violate("job %s on %s: ended %s (every item succeeds within its retries)", id, n.name, j.State)
			}
			if known && j.GPUs != want.gpus || j.GPUs < 0 || j.GPUs > 1 {
				r.violate("job %s on %s asks %d GPUs: submitted with %d (the workload asks 0 or 1)", id, n.name, j.GPUs, want.gpus)
			}
			if n == ns[0] {
				gpus = j.GPUs
				if gpus > 0 {
					r.gpuJobs++
				}
			}
			if j.Items.Done > total || j.Items.Done+j.Items.Failed > total {
				r.violate("job %s on %s: %d items, %d done and %d failed: an item counted twice", id, n.name, total, j.Items.Done, j.Items.Failed)
			}
			seen := map[int64]bool{}
			for _, it := range items {
				if seen[it.Item] {
					r.violate("job %s item %d on %s: listed twice", id, it.Item, n.name)
				}
				seen[it.Item] = true
				// A counted run with a non-zero exit is a failed attempt the
				// job's retries answer; a counted success is the item done.
				counted := 0
				for _, run := range it.Runs {
					if run.Counted && run.ExitCode == 0 {
						counted++
					}
				}
				if it.Status != "done" {
					r.violate("job %s item %d on %s: %s, not done: lost", id, it.Item, n.name, it.Status)
				}
				if counted > 1 {
					r.violate("job %s item %d on %s: recorded done %d times: %s", id, it.Item, n.name, counted, fmtLedgerRuns(it.Runs, names))
				}
			}
			for i := int64(1); i <= total; i++ {
				if !seen[i] {
					r.violate("job %s item %d on %s: missing from job items: lost", id, i, n.name)
				}
			}
			if n == ns[0] {
				r.items += int(total)
			}
		}
		for k := 1; k < len(views); k++ {
			if fmt.Sprint(views[k]) != fmt.Sprint(views[0]) {
				r.violate("job %s: the nodes' job items differ after convergence", id)
				break
			}
		}
		if len(views) > 0 {
			checkRuns(r, id, gpus, views[0], runs, faults, machines, names, hb)
		}
	}
	var overlaps []gpuOverlap
	r.gpuRuns, overlaps = gpuOverlaps(runs)
	for _, o := range overlaps {
		r.violate("GPU %s of %s held by two runs at once: job %s item %d: %s; job %s item %d: %s", o.gpu, names[o.machine],
			o.a.job, o.a.item, fmtHostRuns([]*hostRun{o.a}, names), o.b.job, o.b.item, fmtHostRuns([]*hostRun{o.b}, names))
	}
}

// checkRuns compares one job's items as the ledger says with the real runs
// on the host; each run held gpus GPUs.
func checkRuns(r *report, id string, gpus int64, items []itemInfo, runs map[jobItem][]*hostRun, faults []*fault, machines map[string]int, names map[string]string, hb time.Duration) {
	for _, it := range items {
		hrs := runs[jobItem{id, it.Item}]
		r.realRuns += len(hrs)
		succeeded := 0
		for _, h := range hrs {
			if !h.end.IsZero() && h.rc == 0 {
				succeeded++
			}
			if int64(len(h.gpus)) != gpus {
				r.violate("job %s item %d: a run held GPUs %v; the job asks %d per instance: %s", id, it.Item, h.gpus, gpus, fmtHostRuns([]*hostRun{h}, names))
			}
		}
		if succeeded == 0 {
			r.violate("job %s item %d: no run succeeded on the host (%d started): %s", id, it.Item, len(hrs), fmtHostRuns(hrs, names))
		}
		// Every real run is in the ledger's runs of the item.
		known := map[string]int{}
		for _, lr := range it.Runs {
			known[lr.Machine+"/"+lr.Instance]++
		}
		for _, h := range hrs {
			k := h.machine + "/" + h.instance
			if known[k] == 0 {
				r.violate("job %s item %d: real run %s is not in job items' runs: %s", id, it.Item, fmtHostRuns([]*hostRun{h}, names), fmtLedgerRuns(it.Runs, names))
				continue
			}
			known[k]--
		}
		// Runs beyond the first: a retry after a failed run is the job's
		// retries at work; any other was forced by a partition or a pause,
		// or is a violation.
		for k := 1; k < len(hrs); k++ {
			prev, h := hrs[k-1], hrs[k]
			if !prev.end.IsZero() && prev.rc != 0 && !h.start.Before(prev.end) {
				r.retries++
				continue
			}
			// A run the node stopped (a plan change preempted it) gives
			// its item back to the agenda: the next run after the stop is
			// legitimate when job items record the stop.
			if at, ok := stoppedAt(prev, it.Runs); ok && !h.start.Before(at) {
				r.afterStop++
				continue
			}
			first := hrs[0]
			if why := forced(faults, machines, first.start, h.start, 3*hb, first.machine, h.machine); why != "" {
				r.extraForced++
				if r.forcedBy == nil {
					r.forcedBy = map[string]int{}
				}
				r.forcedBy[why]++
				continue
			}
			r.violate("job %s item %d: ran again with no partition, pause or kill -9 of its first machine to force it: host runs [%s]; ledger runs [%s]; faults meanwhile: %s",
				id, it.Item, fmtHostRuns(hrs, names), fmtLedgerRuns(it.Runs, names), faultsBetween(faults, first.start.Add(-3*hb), h.start))
			break
		}
	}
}

// stoppedAt returns when host run h was stopped, if it wrote no end line
// and job items record it as stopped: its start on the host plus its
// duration in the ledger (a difference of one node's clock, so a skew
// shifts nothing; the host start is a little later than the node's, so the
// estimate errs late).
func stoppedAt(h *hostRun, lrs []ledgerRun) (time.Time, bool) {
	if !h.end.IsZero() {
		return time.Time{}, false
	}
	for _, lr := range lrs {
		if !lr.Stopped || lr.Machine != h.machine || lr.Instance != h.instance {
			continue
		}
		st, err1 := time.Parse(time.RFC3339Nano, lr.Start)
		en, err2 := time.Parse(time.RFC3339Nano, lr.End)
		if err1 != nil || err2 != nil || en.Before(st) {
			continue
		}
		return h.start.Add(en.Sub(st)), true
	}
	return time.Time{}, false
}

func fmtHostRuns(hrs []*hostRun, names map[string]string) string {
	s := make([]string, len(hrs))
	for i, h := range hrs {
		end := "no end line"
		if !h.end.IsZero() {
			end = fmt.Sprintf("%s rc %d", h.end.Format("15:04:05.000"), h.rc)
		} else if !h.alive.IsZero() {
			end = fmt.Sprintf("no end line, alive at %s", h.alive.Format("15:04:05.000"))
		}
		gpus := ""
		if len(h.gpus) > 0 {
			gpus = " on GPUs " + strings.Join(h.gpus, ",")
		}
		s[i] = fmt.Sprintf("%s %s pid %s%s %s..%s", names[h.machine], h.instance, h.pid, gpus, h.start.Format("15:04:05.000"), end)
	}
	return strings.Join(s, "; ")
}

func fmtLedgerRuns(rs []ledgerRun, names map[string]string) string {
	s := make([]string, len(rs))
	clock := func(v string) string {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return t.Local().Format("15:04:05.000")
		}
		return "?"
	}
	for i, r := range rs {
		s[i] = fmt.Sprintf("%s %s %s..%s exit %d counted=%t stopped=%t", names[r.Machine], r.Instance, clock(r.Start), clock(r.End), r.ExitCode, r.Counted, r.Stopped)
	}
	return strings.Join(s, "; ")
}

// faultsBetween lists the faults on at some moment of [from, to].
func faultsBetween(faults []*fault, from, to time.Time) string {
	var s []string
	for _, f := range faults {
		end := f.end
		if end.IsZero() {
			end = time.Now()
		}
		if !f.start.After(to) && !end.Before(from) {
			s = append(s, fmt.Sprintf("%s %s..%s %s", f.kind, f.start.Format("15:04:05.000"), end.Format("15:04:05.000"), f.detail))
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

// stallRE matches the node's log line for a pause it noticed.
var stallRE = regexp.MustCompile(`^time=(\S+) level=WARN msg="this node was not running for a while" for=(\S+)`)

// stalls reads the pauses node n noticed itself from its log.
func stalls(n *node) []*fault {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return nil
	}
	var out []*fault
	for _, l := range strings.Split(string(b), "\n") {
		m := stallRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		at, err1 := time.Parse(time.RFC3339Nano, m[1])
		d, err2 := time.ParseDuration(m[2])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, &fault{kind: stallSeen, nodes: []int{n.i}, detail: fmt.Sprintf("%s not running for %s", n.name, d), start: at.Add(-d), end: at})
	}
	return out
}

// itemProcesses lists the pids of processes whose command line names the
// run log: item processes still alive.
func itemProcesses(runLog string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), runLog) {
			pids = append(pids, pid)
		}
	}
	return pids
}
