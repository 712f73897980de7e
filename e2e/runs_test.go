//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 15: counting the real runs of a job on the host. Every item is a
// plain process (exec driver) that appends a start line and an end line to
// a run log shared by the three nodes on this host, so a run is counted
// whatever the ledger thinks of it.

// hostRun is one real run of an item, read from the run log.
type hostRun struct {
	item              int64
	machine, instance string
	pid               string
	start, end        time.Time // end is zero when the run never wrote its end line
}

// runLogCmd is the job command: a shell script that logs its start and end
// to log, sleeping 0.5..0.9 s (by item) in between when short, 1 s else.
func runLogCmd(log string, quick bool) []string {
	sleep := "1"
	if quick {
		sleep = "0.$((CSHARE_ITEM % 5 + 5))"
	}
	line := `"$CSHARE_ITEM $CSHARE_MACHINE $CSHARE_INSTANCE $$ %s $(date +%%s%%N)" >> ` + log
	script := "echo " + fmt.Sprintf(line, "start") + "; sleep " + sleep + "; echo " + fmt.Sprintf(line, "end")
	return []string{"sh", "-c", script}
}

// readRunLog parses the run log into runs per item, each item's runs in
// order of start.
func readRunLog(t *testing.T, path string) map[int64][]*hostRun {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type key struct{ item, machine, instance, pid string }
	open := map[key]*hostRun{}
	runs := map[int64][]*hostRun{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 {
			t.Fatalf("run log line %d: %q", n, sc.Text())
		}
		item, err1 := strconv.ParseInt(fs[0], 10, 64)
		ns, err2 := strconv.ParseInt(fs[5], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("run log line %d: %q", n, sc.Text())
		}
		at := time.Unix(0, ns)
		k := key{fs[0], fs[1], fs[2], fs[3]}
		switch fs[4] {
		case "start":
			r := &hostRun{item: item, machine: fs[1], instance: fs[2], pid: fs[3], start: at}
			open[k] = r
			runs[item] = append(runs[item], r)
		case "end":
			r := open[k]
			if r == nil {
				t.Fatalf("run log line %d: an end with no start: %q", n, sc.Text())
			}
			r.end = at
			delete(open, k)
		default:
			t.Fatalf("run log line %d: %q", n, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, rs := range runs {
		sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
	}
	return runs
}

// runFigures counts the real runs and the runs beyond one per item.
func runFigures(runs map[int64][]*hostRun) (nreal, dups int) {
	for _, rs := range runs {
		nreal += len(rs)
		dups += len(rs) - 1
	}
	return nreal, dups
}

// ledgerRun and ledgerItem are `job items --json` with the runs.
type ledgerRun struct {
	Machine  string `json:"machine"`
	Instance string `json:"instance"`
	Start    string `json:"start"`
	End      string `json:"end"`
	ExitCode int64  `json:"exit_code"`
	Counted  bool   `json:"counted"`
	Stopped  bool   `json:"stopped"`
}

type ledgerItem struct {
	Item     int64       `json:"item"`
	Status   string      `json:"status"`
	Attempts int64       `json:"attempts"`
	Machine  string      `json:"machine"`
	Runs     []ledgerRun `json:"runs"`
}

// ledgerView is what the ledger says of the job's runs: the items, the sum
// of their attempts, and its runs beyond one per item: the job's
// duplicate_runs and the runs stopped before they ended (preempted), whose
// items ran again.
func ledgerView(t *testing.T, p *proc, id string) (items []ledgerItem, attempts, extra int64) {
	t.Helper()
	p.json(&items, "job", "items", id)
	for _, it := range items {
		attempts += it.Attempts
		for _, r := range it.Runs {
			if r.Stopped {
				extra++
			}
		}
	}
	var j struct {
		DuplicateRuns int64 `json:"duplicate_runs"`
	}
	p.json(&j, "job", "show", id)
	return items, attempts, extra + j.DuplicateRuns
}

// keepArtifacts copies the run log and the nodes' logs to
// $CSHARE_E2E_ARTIFACTS/<test name>/ when the test ends, if that is set.
func keepArtifacts(t *testing.T, runLog string, ps []*proc) {
	dir := os.Getenv("CSHARE_E2E_ARTIFACTS")
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, t.Name())
	t.Cleanup(func() {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Log(err)
			return
		}
		for _, f := range append([]string{runLog}, logPaths(ps)...) {
			if b, err := os.ReadFile(f); err == nil {
				_ = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
			}
		}
		t.Logf("artifacts in %s", dir)
	})
}

func logPaths(ps []*proc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.logPath)
	}
	return out
}

// execConf writes a node.yaml for the exec driver with slots slots.
func execConf(t *testing.T, slots int) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "node.yaml")
	yaml := fmt.Sprintf("runtime: {exec: true, docker: false}\nresources: {max_concurrent_jobs: %d}\ndiscovery: {mdns: false}\n", slots)
	if err := os.WriteFile(conf, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return conf
}

// converged waits until every node has one state hash: the org is settled
// (every machine's hardware and limits, written when it joins, known to
// all) before a job is submitted. Without it, the first plans of a job
// differ between nodes (the submitter may still count a machine with 0
// slots) and their first items collide; that start-up race is not what
// these tests measure.
func converged(t *testing.T, ps []*proc) {
	t.Helper()
	eventually(t, 30*time.Second, "one state hash on every node", func() bool {
		hashes := map[string]bool{}
		for _, p := range ps {
			var o orgInfo
			p.json(&o, "org", "show")
			hashes[o.StateHash] = true
		}
		return len(hashes) == 1
	})
}

func machineID(t *testing.T, p *proc) string {
	t.Helper()
	var st status
	p.json(&st, "node", "status")
	return st.ID
}

// runsOn counts the runs in the run log that machine started after since.
func runsOn(t *testing.T, log, machine string, since time.Time) int {
	t.Helper()
	if _, err := os.Stat(log); err != nil {
		return 0
	}
	n := 0
	for _, rs := range readRunLog(t, log) {
		for _, r := range rs {
			if r.machine == machine && r.start.After(since) {
				n++
			}
		}
	}
	return n
}

// waitJobDone waits until p shows the job done and every item done.
func waitJobDone(t *testing.T, p *proc, id string, d time.Duration) {
	t.Helper()
	eventually(t, d, "job "+id+" done", func() bool {
		var j job
		p.json(&j, "job", "show", id)
		if j.State == "failed" || j.State == "cancelled" {
			t.Fatalf("job %s is %s: %s", id, j.State, j.Error)
		}
		return j.State == "done"
	})
	var items []item
	p.json(&items, "job", "items", id)
	for _, it := range items {
		if it.Status != "done" {
			t.Fatalf("item %d is %s", it.Item, it.Status)
		}
	}
}

// checkEveryItemRan fails unless items 1..n each have a run with an end.
func checkEveryItemRan(t *testing.T, runs map[int64][]*hostRun, n int64) {
	t.Helper()
	for i := int64(1); i <= n; i++ {
		ended := false
		for _, r := range runs[i] {
			ended = ended || !r.end.IsZero()
		}
		if !ended {
			t.Errorf("item %d: no run finished on the host (%d started)", i, len(runs[i]))
		}
	}
	if int64(len(runs)) != n {
		t.Errorf("the run log has %d items, want %d", len(runs), n)
	}
}

func fmtRun(r *hostRun) string {
	end := "never"
	if !r.end.IsZero() {
		end = r.end.Format("15:04:05.000")
	}
	return fmt.Sprintf("%s/%s pid %s %s..%s", short(r.machine), r.instance, r.pid, r.start.Format("15:04:05.000"), end)
}

func short(id string) string {
	if len(id) > 12 {
		return id[len(id)-12:]
	}
	return id
}

// TestPausedNodeCatchesUp: one of three machines is stopped (SIGSTOP) for
// ten heartbeat intervals mid-job while the others go on; after SIGCONT it
// is connected again and on the org's state within three intervals, and
// it starts no run of an item whose counted run ended before SIGCONT.
func TestPausedNodeCatchesUp(t *testing.T) {
	const interval = time.Second
	const items = 120
	log := filepath.Join(t.TempDir(), "runs.log")
	ps := mesh(t, 3, "--heartbeat-interval", interval.String(), "--config", execConf(t, 2))
	keepArtifacts(t, log, ps)
	converged(t, ps)
	victim := ps[2]
	vid := machineID(t, victim)
	id := lastLine(ps[0].must(append([]string{"job", "submit", "--driver", "exec", "--cpus", "3", "--max-cpus", "6",
		"--range", fmt.Sprintf("1-%d", items), "--"}, runLogCmd(log, false)...)...))
	t0 := time.Now()
	eventually(t, 60*time.Second, "the victim runs items", func() bool { return runsOn(t, log, vid, t0) >= 2 })

	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	tStop := time.Now()
	time.Sleep(10 * interval) // the pause: time passes, the others work
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	tCont := time.Now()

	var j job
	ps[0].json(&j, "job", "show", id)
	if j.State == "done" {
		t.Fatalf("the job ended during the pause: make it longer")
	}
	eventually(t, 3*interval, "the resumed machine has 2 peers and another machine's state hash", func() bool {
		var st status
		victim.json(&st, "node", "status")
		if st.Peers != 2 {
			return false
		}
		var a, b, v orgInfo
		victim.json(&v, "org", "show")
		ps[0].json(&a, "org", "show")
		ps[1].json(&b, "org", "show")
		return v.StateHash == a.StateHash || v.StateHash == b.StateHash
	})
	healed := time.Since(tCont)
	waitJobDone(t, ps[0], id, 120*time.Second)

	runs := readRunLog(t, log)
	checkEveryItemRan(t, runs, items)
	lItems, attempts, dupRuns := ledgerView(t, ps[0], id)
	// The others worked during the pause, and the victim after it.
	others, after := 0, 0
	for _, rs := range runs {
		for _, r := range rs {
			if r.machine != vid && !r.end.IsZero() && r.end.After(tStop) && r.end.Before(tCont) {
				others++
			}
			if r.machine == vid && r.start.After(tCont) {
				after++
			}
		}
	}
	if others == 0 {
		t.Errorf("no run ended on the other machines during the pause")
	}
	// No run started on the resumed machine after SIGCONT for an item whose
	// counted run (the ledger's) ended before SIGCONT.
	bad := 0
	for _, it := range lItems {
		var counted *ledgerRun
		for i := range it.Runs {
			if it.Runs[i].Counted {
				counted = &it.Runs[i]
			}
		}
		if counted == nil {
			t.Errorf("item %d: no counted run in the ledger: %+v", it.Item, it.Runs)
			continue
		}
		end, err := time.Parse(time.RFC3339Nano, counted.End)
		if err != nil {
			t.Errorf("item %d: counted run end %q: %v", it.Item, counted.End, err)
			continue
		}
		if !end.Before(tCont) {
			continue
		}
		for _, r := range runs[it.Item] {
			if r.machine == vid && r.start.After(tCont) {
				bad++
				t.Errorf("item %d: counted run on %s ended %s, before SIGCONT (%s), yet the resumed machine started it again: %s",
					it.Item, short(counted.Machine), end.Format("15:04:05.000"), tCont.Format("15:04:05.000"), fmtRun(r))
			}
		}
	}
	nreal, dups := runFigures(runs)
	t.Logf("items=%d real_runs=%d duplicates=%d ledger_attempts=%d ledger_duplicate_runs=%d pause=%s healed_after=%.2fs others_ended_in_pause=%d victim_started_after=%d reruns_after_sigcont=%d",
		items, nreal, dups, attempts, dupRuns, tCont.Sub(tStop).Round(time.Millisecond), healed.Seconds(), others, after, bad)
	logDuplicates(t, runs)
	checkLedgerKnowsRuns(t, nreal, dups, attempts, dupRuns)
}

// checkLedgerKnowsRuns fails unless the ledger's attempts are the real
// runs on the host and its duplicate and stopped runs the runs beyond one
// per item: a run the ledger does not know was lost (by adoption, or killed
// unseen).
func checkLedgerKnowsRuns(t *testing.T, nreal, dups int, attempts, dupRuns int64) {
	t.Helper()
	if attempts != int64(nreal) || dupRuns != int64(dups) {
		t.Errorf("the ledger counts %d attempts and %d duplicate or stopped runs; the host saw %d runs, %d beyond one per item", attempts, dupRuns, nreal, dups)
	}
}

// logDuplicates logs every item that ran more than once, saying whether
// its runs overlapped in time (two slots took it at once) or one started
// after another had ended (it was run again).
func logDuplicates(t *testing.T, runs map[int64][]*hostRun) {
	t.Helper()
	keys := make([]int64, 0, len(runs))
	for k := range runs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, k := range keys {
		if rs := runs[k]; len(rs) > 1 {
			s := make([]string, len(rs))
			for i, r := range rs {
				s[i] = fmtRun(r)
			}
			kind := "at once"
			for i := 1; i < len(rs); i++ {
				for _, a := range rs[:i] {
					if !a.end.IsZero() && !rs[i].start.Before(a.end) {
						kind = "again after an end"
					}
				}
			}
			t.Logf("item %d ran %d times (%s): %s", k, len(rs), kind, strings.Join(s, "; "))
		}
	}
}

// kill9Restart kills p with SIGKILL and starts it again at once; it
// returns how long the node was down (kill to API up).
func kill9Restart(p *proc) time.Duration {
	t0 := time.Now()
	p.kill9()
	p.start()
	return time.Since(t0)
}

// TestKill9OneNodeNoRerun: one of three machines is killed with SIGKILL
// and restarted at once five times during a 200-item job. Its runs go on
// (the exec driver's processes outlive it and are adopted), it is back
// before the others would call it offline, so no item runs twice.
func TestKill9OneNodeNoRerun(t *testing.T) {
	const items = 200
	const kills = 5
	log := filepath.Join(t.TempDir(), "runs.log")
	ps := mesh(t, 3, "--heartbeat-interval", "1s", "--config", execConf(t, 4))
	keepArtifacts(t, log, ps)
	converged(t, ps)
	victim := ps[2]
	vid := machineID(t, victim)
	id := lastLine(ps[0].must(append([]string{"job", "submit", "--driver", "exec", "--cpus", "3", "--max-cpus", "12",
		"--range", fmt.Sprintf("1-%d", items), "--"}, runLogCmd(log, true)...)...))

	since := time.Now()
	var downs []string
	for k := 0; k < kills; k++ {
		// Kill it while it runs items it took since it last started.
		// Kill it while it runs items it took since it last started, at
		// least 1.5 s (1.5 intervals) after that start, so the kills are
		// spread over the job.
		eventually(t, 30*time.Second, fmt.Sprintf("the victim takes items before kill %d", k+1), func() bool {
			return time.Since(since) >= 1500*time.Millisecond && runsOn(t, log, vid, since) >= 2
		})
		var j job
		ps[0].json(&j, "job", "show", id)
		if j.State == "done" {
			t.Fatalf("the job ended after %d kills: make it longer", k)
		}
		since = time.Now()
		downs = append(downs, kill9Restart(victim).Round(time.Millisecond).String())
	}
	waitJobDone(t, ps[0], id, 120*time.Second)

	runs := readRunLog(t, log)
	checkEveryItemRan(t, runs, items)
	_, attempts, dupRuns := ledgerView(t, ps[0], id)
	nreal, dups := runFigures(runs)
	t.Logf("items=%d real_runs=%d duplicates=%d ledger_attempts=%d ledger_duplicate_runs=%d kills=%d down=%v",
		items, nreal, dups, attempts, dupRuns, kills, downs)
	logDuplicates(t, runs)
	if dups != 0 {
		t.Errorf("%d item runs beyond one per item; want none", dups)
	}
	checkLedgerKnowsRuns(t, nreal, dups, attempts, dupRuns)
}

// TestKill9AllThreeFewExtraRuns: all three machines are killed with
// SIGKILL mid-job and restarted. The job completes with at most 1% extra
// runs (real runs - items <= ceil(items/100), and never fewer than 1
// allowed), and no item ever runs on two machines at the same moment.
func TestKill9AllThreeFewExtraRuns(t *testing.T) {
	const items = 200
	log := filepath.Join(t.TempDir(), "runs.log")
	ps := mesh(t, 3, "--heartbeat-interval", "1s", "--config", execConf(t, 4))
	keepArtifacts(t, log, ps)
	converged(t, ps)
	id := lastLine(ps[0].must(append([]string{"job", "submit", "--driver", "exec", "--cpus", "3", "--max-cpus", "12",
		"--range", fmt.Sprintf("1-%d", items), "--"}, runLogCmd(log, true)...)...))
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = machineID(t, p)
	}
	t0 := time.Now()
	eventually(t, 60*time.Second, "every machine runs items", func() bool {
		for _, m := range ids {
			if runsOn(t, log, m, t0) < 2 {
				return false
			}
		}
		return true
	})
	restarted := kill9All(ps)
	waitJobDone(t, ps[0], id, 120*time.Second)

	runs := readRunLog(t, log)
	checkEveryItemRan(t, runs, items)
	_, attempts, dupRuns := ledgerView(t, ps[0], id)
	nreal, dups := runFigures(runs)
	allowed := max(1, (items+99)/100)
	t.Logf("items=%d real_runs=%d duplicates=%d allowed=%d ledger_attempts=%d ledger_duplicate_runs=%d kills=3 (all at once) restart_took=%.2fs",
		items, nreal, dups, allowed, attempts, dupRuns, restarted.Seconds())
	logDuplicates(t, runs)
	checkLedgerKnowsRuns(t, nreal, dups, attempts, dupRuns)
	if dups > allowed {
		t.Errorf("%d extra runs for %d items; want at most %d (1%%)", dups, items, allowed)
	}
	// No item runs on two machines at the same moment.
	now := time.Now()
	for item, rs := range runs {
		for i, a := range rs {
			for _, b := range rs[i+1:] {
				if a.machine == b.machine {
					continue
				}
				ae, be := a.end, b.end
				if ae.IsZero() {
					ae = now
				}
				if be.IsZero() {
					be = now
				}
				if a.start.Before(be) && b.start.Before(ae) {
					t.Errorf("item %d ran on two machines at once: %s and %s", item, fmtRun(a), fmtRun(b))
				}
			}
		}
	}
}
