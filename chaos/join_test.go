//go:build chaos

package chaos

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A machine joins from a checkpoint during the run (issue 29): the org
// writes a checkpoint every `every` entries (org set
// ledger.checkpoint_every), and once the ledger holds more than that, a
// sixth node, started only then, joins with the org key
// (/cshare/checkpoint/1.0.0, replica.JoinAt), is approved and made an
// admin, and from then on takes jobs' items, is submitted to and suffers
// the nemesis like the others. Its log says where its ledger started; the
// checker then holds it to every invariant, and to converging with the
// others.

// checkpointEvery is the org's ledger.checkpoint_every for a run of dur:
// CHAOS_CHECKPOINT_EVERY, else 1,000 entries for 10 minutes or more and
// proportionally fewer for a shorter run (the workload writes about 4
// entries a second; the org's minimum is 100), so that a 2-minute run
// also has a checkpoint to join from.
func checkpointEvery(dur time.Duration) (int64, error) {
	if s := os.Getenv("CHAOS_CHECKPOINT_EVERY"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 100 {
			return 0, fmt.Errorf("CHAOS_CHECKPOINT_EVERY: %q; want a count of entries, 100 or more", s)
		}
		return v, nil
	}
	return max(100, min(1000, int64(1000*dur/(10*time.Minute)))), nil
}

// minJoinedToRun is how long the joiner must have been in the org, at the
// report, for a run without an item of its to be a violation.
const minJoinedToRun = 45 * time.Second

// joiner brings n into the org from a checkpoint.
type joiner struct {
	n, owner *node // the new node; the org's creator, which approves it
	key      string
	every    int64
	nem      *nemesis
	wl       *workload

	mu      sync.Mutex
	asked   time.Time // when the join started (zero: never)
	at      time.Time // when n was in the org, approved and an admin (zero: never)
	entries int       // the most entries a node held when the join started
	errs    []string  // failed attempts
}

// run waits until the org's ledger holds a checkpoint, and at least
// after, then joins n; it gives up when stop closes.
func (j *joiner) run(stop <-chan struct{}, after time.Duration) {
	t0 := time.Now()
	for {
		if !sleepOrStopped(2*time.Second, stop) {
			return
		}
		if time.Since(t0) < after {
			continue
		}
		// The lowest online admin machine writes the checkpoint at its
		// next heartbeat past `every` entries; a margin covers partitions.
		if most := j.mostEntries(); most < int(j.every)+int(j.every)/10+20 {
			continue
		} else {
			j.mu.Lock()
			j.entries = most
			j.mu.Unlock()
		}
		break
	}
	// No process fault on the owner while it admits n (partitions go on:
	// every step is tried again until it answers).
	if !j.nem.reserve(j.owner.i, stop) {
		return
	}
	defer j.nem.release(j.owner.i)
	j.mu.Lock()
	j.asked = time.Now()
	j.mu.Unlock()
	if err := j.n.start(""); err != nil {
		j.fail("start: %v", err)
		return
	}
	const d = 60 * time.Second
	var st nodeStatus
	steps := []func() error{
		func() error {
			if err := j.n.json(d, &st, "node", "status"); err == nil && st.StateHash != "" {
				return nil // the join went through, though its answer did not
			}
			_, err := j.n.cli(d, "node", "join", "--org-key", j.key)
			return err
		},
		func() error { return j.n.json(d, &st, "node", "status") },
		func() error { _, err := j.owner.cli(d, "machine", "approve", st.ID); return err },
		func() error { _, err := j.owner.cli(d, "member", "set-role", st.Person, "admin"); return err },
	}
	for _, step := range steps {
		for {
			err := step()
			if err == nil {
				break
			}
			j.fail("%v", err)
			if !sleepOrStopped(2*time.Second, stop) {
				return
			}
		}
	}
	j.n.id = st.ID
	j.nem.add(j.n)
	j.wl.add(j.n)
	j.mu.Lock()
	j.at = time.Now()
	j.mu.Unlock()
}

// mostEntries is the most entries any node says it holds (0 if none
// answers).
func (j *joiner) mostEntries() int {
	most := 0
	for _, n := range j.nem.nodes() {
		var st nodeStatus
		if err := n.json(5*time.Second, &st, "node", "status"); err == nil {
			most = max(most, st.Entries)
		}
	}
	return most
}

func (j *joiner) fail(format string, a ...any) {
	j.mu.Lock()
	j.errs = append(j.errs, fmt.Sprintf(format, a...))
	j.mu.Unlock()
}

// checkpointStart matches the node's log line for a ledger started from a
// peer's checkpoint (replica.joinFrom).
var checkpointStart = regexp.MustCompile(`^time=(\S+) level=INFO msg="ledger: started from a checkpoint" peer=(\S+) entries=(\d+)`)

// startedAt reads from n's log when its ledger started from a checkpoint
// and with how many entries (the checkpoint, the ancestors later entries
// name, and the entries after it).
func startedAt(n *node) (at time.Time, entries int, ok bool) {
	b, err := os.ReadFile(n.logPath)
	if err != nil {
		return time.Time{}, 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if m := checkpointStart.FindStringSubmatch(l); m != nil {
			at, _ = time.Parse(time.RFC3339Nano, m[1])
			entries, _ = strconv.Atoi(m[3])
			return at, entries, true
		}
	}
	return time.Time{}, 0, false
}

// joined is what the report says of the join.
type joined struct {
	name          string
	every         int64
	asked, at     time.Time
	orgEntries    int // the most entries a node held when the join started
	startEntries  int // what n's ledger started with (0: not from a checkpoint)
	fromCkpt      bool
	runs, attempt int // its real runs on the host; failed join steps
}

func (j joined) String() string {
	if j.asked.IsZero() {
		return fmt.Sprintf("join from a checkpoint (ledger.checkpoint_every=%d): %s never joined (the ledger did not reach %d entries)", j.every, j.name, j.every)
	}
	how := "NOT from a checkpoint (it fetched the whole ledger)"
	if j.fromCkpt {
		how = fmt.Sprintf("from a checkpoint: its ledger started with %d entries while the org's held %d", j.startEntries, j.orgEntries)
	}
	return fmt.Sprintf("join from a checkpoint (ledger.checkpoint_every=%d): %s joined at %s (in the org %s later, %d failed steps), %s; it then ran items %d times on the host",
		j.every, j.name, j.asked.Format("15:04:05"), j.at.Sub(j.asked).Round(time.Millisecond), j.attempt, how, j.runs)
}

// report returns the join's figures, with the real runs of the new
// node counted from runs, and records its violations in r.
func (j *joiner) report(r *report, runs map[jobItem][]*hostRun) joined {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := joined{name: j.n.name, every: j.every, asked: j.asked, at: j.at, orgEntries: j.entries, attempt: len(j.errs)}
	if j.at.IsZero() {
		r.violate("%s did not join the org during the run (ledger.checkpoint_every=%d; failed steps: %s)", j.n.name, j.every, strings.Join(j.errs, "; "))
		return out
	}
	_, out.startEntries, out.fromCkpt = startedAt(j.n)
	if !out.fromCkpt {
		r.violate("%s joined, but its log does not say its ledger started from a checkpoint (the org's ledger held %d entries, checkpoint_every %d)", j.n.name, j.entries, j.every)
	}
	for _, hrs := range runs {
		for _, h := range hrs {
			if h.machine == j.n.id {
				out.runs++
			}
		}
	}
	// A joiner that came late in a short run (the checkpoint it waits for
	// came late, or it was paused or cut off in its last seconds) may find
	// every job's items taken: it must run one only when it had time to.
	if in := time.Since(j.at); out.runs == 0 && in >= minJoinedToRun {
		r.violate("%s joined from a checkpoint %s before the end but ran no item", j.n.name, in.Round(time.Second))
	}
	return out
}

// reserve marks node i busy for the nemesis (no process fault), waiting
// while a fault holds it; false if stop closed first.
func (m *nemesis) reserve(i int, stop <-chan struct{}) bool {
	for {
		m.mu.Lock()
		if !m.nodeBusy[i] {
			m.nodeBusy[i] = true
			m.mu.Unlock()
			return true
		}
		m.mu.Unlock()
		if !sleepOrStopped(200*time.Millisecond, stop) {
			return false
		}
	}
}

func (m *nemesis) release(i int) {
	m.mu.Lock()
	m.nodeBusy[i] = false
	m.mu.Unlock()
}

// add makes n a node the nemesis acts on.
func (m *nemesis) add(n *node) {
	m.mu.Lock()
	m.ns = append(m.ns, n)
	m.nodeBusy = append(m.nodeBusy, false)
	m.mu.Unlock()
}

// nodes returns the nodes the nemesis acts on now.
func (m *nemesis) nodes() []*node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*node(nil), m.ns...)
}

// add makes n a node jobs are submitted through.
func (w *workload) add(n *node) {
	w.mu.Lock()
	w.ns = append(w.ns, n)
	w.mu.Unlock()
}

// sleepOrStopped sleeps d and reports true, or false as soon as stop
// closes.
func sleepOrStopped(d time.Duration, stop <-chan struct{}) bool {
	select {
	case <-time.After(d):
		return true
	case <-stop:
		return false
	}
}
