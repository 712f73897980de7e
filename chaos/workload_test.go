//go:build chaos

package chaos

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The workload: range jobs whose every item is a shell process (exec
// driver) that appends a start line and an end line to a run log on the
// host, so a real run is counted whatever any ledger says of it. An item
// whose number is a multiple of failEvery fails its first run (exit 3) and
// succeeds after: the jobs' retries are exercised.
const failEvery = 9

// itemCmd is the job command: it logs "JOB ITEM MACHINE INSTANCE PID start
// NS" and "... end NS RC" to runLog.
func itemCmd(runLog, failDir string) []string {
	line := `"$CSHARE_JOB_ID $CSHARE_ITEM $CSHARE_MACHINE $CSHARE_INSTANCE $$ %s $(date +%%s%%N)%s" >> ` + runLog
	script := "echo " + fmt.Sprintf(line, "start", "") +
		"; sleep 0.$((CSHARE_ITEM % 5 + 3)); rc=0" +
		fmt.Sprintf("; if [ $((CSHARE_ITEM %% %d)) = 0 ] && mkdir %s/$CSHARE_JOB_ID-$CSHARE_ITEM 2>/dev/null; then rc=3; fi", failEvery, failDir) +
		"; echo " + fmt.Sprintf(line, "end", " $rc") + "; exit $rc"
	return []string{"sh", "-c", script}
}

// hostRun is one real run of an item, read from the run log.
type hostRun struct {
	job                    string
	item                   int64
	machine, instance, pid string
	start, end             time.Time // end is zero when the run wrote no end line
	rc                     int
}

type jobItem struct {
	job  string
	item int64
}

// readRunLog parses the run log into runs per job item, in order of start.
func readRunLog(path string) (map[jobItem][]*hostRun, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[jobItem][]*hostRun{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type key struct{ job, item, machine, instance, pid string }
	open := map[key]*hostRun{}
	runs := map[jobItem][]*hostRun{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		bad := fmt.Errorf("run log line %d: %q", n, sc.Text())
		if len(fs) < 7 {
			return nil, bad
		}
		item, err1 := strconv.ParseInt(fs[1], 10, 64)
		ns, err2 := strconv.ParseInt(fs[6], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, bad
		}
		k := key{fs[0], fs[1], fs[2], fs[3], fs[4]}
		switch {
		case fs[5] == "start" && len(fs) == 7:
			r := &hostRun{job: fs[0], item: item, machine: fs[2], instance: fs[3], pid: fs[4], start: time.Unix(0, ns)}
			open[k] = r
			ji := jobItem{fs[0], item}
			runs[ji] = append(runs[ji], r)
		case fs[5] == "end" && len(fs) == 8:
			r := open[k]
			rc, err := strconv.Atoi(fs[7])
			if r == nil || err != nil {
				return nil, bad
			}
			r.end, r.rc = time.Unix(0, ns), rc
			delete(open, k)
		default:
			return nil, bad
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, rs := range runs {
		sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
	}
	return runs, nil
}

// workload submits a job every interval through a random node until stop
// is closed.
type workload struct {
	ns              []*node
	runLog, failDir string
	rng             *rand.Rand

	mu        sync.Mutex
	submitted map[string]int64 // job ID -> items, for submits that answered
	attempts  int
	failed    []string // submits that got no answer or an error
}

func (w *workload) run(stop <-chan struct{}, every time.Duration) {
	for k := 1; ; k++ {
		select {
		case <-stop:
			return
		case <-time.After(every):
		}
		w.mu.Lock()
		n := w.ns[w.rng.IntN(len(w.ns))]
		items := int64(20 + w.rng.IntN(31))
		w.attempts++
		w.mu.Unlock()
		args := append([]string{"job", "submit", "--driver", "exec", "--cpus", "2", "--max-cpus", "6", "--retries", "2",
			"--name", fmt.Sprintf("chaos-%d", k), "--range", fmt.Sprintf("1-%d", items), "--"}, itemCmd(w.runLog, w.failDir)...)
		out, err := n.cli(15*time.Second, args...)
		w.mu.Lock()
		if err != nil {
			w.failed = append(w.failed, err.Error())
		} else {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			w.submitted[strings.TrimSpace(lines[len(lines)-1])] = items
		}
		w.mu.Unlock()
	}
}
