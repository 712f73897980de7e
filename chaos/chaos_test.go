//go:build chaos

package chaos

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestChaos is `make chaos`: CHAOS_DURATION (default 10m) of faults under a
// job workload, then healing and the checks. CHAOS_HEARTBEAT (default 1s)
// is the nodes' heartbeat interval, CHAOS_SEED the nemesis's seed (default
// random, printed), CHAOS_FAULTS a comma-separated subset of the fault
// kinds (default all), CHAOS_SUMMARY a file to write the summary to.
// n5 sits behind a NAT router that drops what comes in unasked (issue 32):
// the others reach it only through the org's relays (the four public
// nodes serve them) or a connection it opened; CHAOS_NAT=0 puts it on the
// internet with the others. CHAOS_CHECKPOINT_EVERY is the org's
// ledger.checkpoint_every (default: checkpointEvery); a sixth node joins
// from a checkpoint midway (join_test.go).
func TestChaos(t *testing.T) {
	dur := envDuration(t, "CHAOS_DURATION", 10*time.Minute)
	hb := envDuration(t, "CHAOS_HEARTBEAT", time.Second)
	seed := rand.Uint64()
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED: %q is not a number", s)
		}
		seed = v
	}
	var kinds []string
	if s := os.Getenv("CHAOS_FAULTS"); s != "" {
		for _, k := range strings.Split(s, ",") {
			if !slices.Contains(faultKinds, k) && k != faultTerm {
				t.Fatalf("CHAOS_FAULTS: %q is not a fault kind; use %s or %s", k, strings.Join(faultKinds, ", "), faultTerm)
			}
			kinds = append(kinds, k)
		}
	}
	natted := 4
	switch os.Getenv("CHAOS_NAT") {
	case "", "1":
	case "0":
		natted = -1
	default:
		t.Fatalf("CHAOS_NAT: %q; use 1 (n5 behind a NAT, the default) or 0 (every node public)", os.Getenv("CHAOS_NAT"))
	}
	if why := canNetns(); why != "" {
		t.Skipf("chaos: skipped: %s", why)
	}
	base := t.TempDir()
	runLog, failDir := filepath.Join(base, "runs.log"), filepath.Join(base, "fail")
	if err := os.Mkdir(failDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := cshareBin(t)
	every, err := checkpointEvery(dur)
	if err != nil {
		t.Fatal(err)
	}
	w := setupNet(t, 6, natted)
	// Cleanups run last first: the nodes stop, then their item processes
	// are killed, then the network goes, then the temp dirs.
	t.Cleanup(func() {
		for _, pid := range itemProcesses(runLog) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	ns, later := startNodes(t, w, bin, 5, 2, hb)
	t.Cleanup(func() { keepLogs(t, append(ns, later...), runLog) })
	key := formOrg(t, ns)
	if _, err := ns[0].cli(30*time.Second, "org", "set", fmt.Sprintf("ledger.checkpoint_every=%d", every)); err != nil {
		t.Fatal(err)
	}
	t.Logf("org formed on 5 nodes (%s..%s), a checkpoint every %d entries; %s of chaos, seed %d; %s joins from a checkpoint",
		w.addr(0), w.addr(4), every, dur, seed, later[0].name)
	for i, n := range ns {
		t.Logf("%s = machine %s at %s (%s on the internet) in namespace %s", n.name, n.id, n.ip, w.addr(i), n.ns)
	}
	var paths *pathCount
	if natted >= 0 {
		relays := waitRelayed(t, ns[natted], ns, 2*time.Minute)
		t.Logf("%s is private, reachable through the relays of %s", ns[natted].name, relays)
		paths = &pathCount{n: ns[natted], relays: relays}
	}

	wl := &workload{ns: ns, runLog: runLog, failDir: failDir, rng: rand.New(rand.NewPCG(seed, 1)), submitted: map[string]submission{}}
	nem := newNemesis(w, ns, seed, kinds)
	jn := &joiner{n: later[0], owner: ns[0], key: key, every: every, nem: nem, wl: wl}
	stop := make(chan struct{})
	wlDone, nemDone, joinDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { wl.run(stop, 6*time.Second); close(wlDone) }()
	go func() { nem.run(stop); close(nemDone) }()
	go func() { jn.run(stop, dur/3); close(joinDone) }()
	pathsDone := make(chan struct{})
	go func() { paths.run(stop, ns); close(pathsDone) }()
	<-time.After(dur)
	close(stop)
	<-wlDone
	<-nemDone
	<-pathsDone
	<-joinDone
	ns = nem.nodes() // with the node that joined
	// Heal: every fault healed itself when stop closed; make sure.
	w.heal()
	for _, n := range ns {
		n.mu.Lock()
		running, paused, skew := n.cmd != nil, n.paused, n.skew
		n.mu.Unlock()
		if paused {
			_ = n.signal(syscall.SIGCONT)
		}
		if !running || skew != "" {
			n.stopGracefully()
			if err := n.start(""); err != nil {
				t.Fatal(err)
			}
		}
	}
	healed := time.Now()
	r := &report{duration: dur, hb: hb, seed: seed, faults: nem.faults, paths: paths}
	for _, e := range nem.errs {
		r.violate("the nemesis failed: %s", e)
	}
	r.submits, r.submitFails = wl.attempts, len(wl.failed)
	r.nodes = len(ns)
	r.convergeHeal, r.convergeHealOK = waitConverged(ns, 3*hb, false, nil)
	if !r.convergeHealOK {
		r.violate("after healing, the nodes had not one state hash and one plan hash within 3 heartbeat intervals (%s)", 3*hb)
		more, _ := waitConverged(ns, 2*time.Minute, false, t.Logf)
		r.convergeHeal += more
	}
	// Every job ends.
	drainBy := time.Now().Add(5*time.Minute + dur/2)
	for {
		var jobs []jobInfo
		if err := ns[0].json(30*time.Second, &jobs, "job", "ls"); err == nil {
			open := 0
			for _, j := range jobs {
				if !ended(j.State) {
					open++
				}
			}
			if open == 0 {
				break
			}
			if time.Now().After(drainBy) {
				r.violate("%d jobs had not ended %s after healing", open, time.Since(healed).Round(time.Second))
				break
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.drained = time.Since(healed)
	var ok bool
	if r.convergeEnd, ok = waitConverged(ns, 30*time.Second, true, t.Logf); !ok {
		r.violate("with every job ended, the nodes did not agree on one state and plan, every peer connected, within 30s")
	}
	// The runtime: no item process outlives its job.
	deadline := time.Now().Add(10 * time.Second)
	for len(itemProcesses(runLog)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := itemProcesses(runLog); len(left) > 0 {
		r.violate("item processes still running 10s after every job ended: pids %v", left)
	}
	runs, err := readRunLog(runLog)
	if err != nil {
		t.Fatal(err)
	}
	wl.mu.Lock()
	submitted := wl.submitted
	wl.mu.Unlock()
	faults := nem.faults
	for _, n := range ns {
		faults = append(faults, stalls(n)...)
	}
	r.faults = faults
	checkLedgers(r, ns, runs, submitted, faults, hb)
	j := jn.report(r, runs)
	r.joined = &j
	for _, f := range wl.failed {
		t.Logf("submit without an answer: %s", f)
	}
	for _, f := range faults {
		t.Logf("fault %s %s..%s %s", f.kind, f.start.Format("15:04:05.000"), f.end.Format("15:04:05.000"), f.detail)
	}
	sum := r.String()
	t.Log("\n" + sum)
	if p := os.Getenv("CHAOS_SUMMARY"); p != "" {
		if err := os.WriteFile(p, []byte(sum), 0o644); err != nil {
			t.Error(err)
		}
	}
	if len(r.violations) > 0 {
		t.Errorf("%d violations (see the summary)", len(r.violations))
	}
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("%s: %q is not a positive duration such as 2m", name, s)
	}
	return d
}

// keepLogs copies the nodes' logs and the run log to $CHAOS_ARTIFACTS, if
// set, before the temp dirs go.
func keepLogs(t *testing.T, ns []*node, runLog string) {
	dir := os.Getenv("CHAOS_ARTIFACTS")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Log(err)
		return
	}
	files := []string{runLog}
	for _, n := range ns {
		files = append(files, n.logPath)
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil {
			_ = os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644)
		}
	}
	t.Logf("logs kept in %s", dir)
}
