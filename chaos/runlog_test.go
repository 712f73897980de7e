package chaos

// The run log, without the chaos tag: its unit tests (gpu_test.go) run in
// `go test ./...`.

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Every workload item is a shell process (exec driver) that appends a
// start line, an alive line every 0.1s while it holds a GPU, and an end
// line to a run log on the host, so a real run is counted whatever any
// ledger says of it. An item whose number is a multiple of failEvery fails
// its first run (exit 3) and succeeds after: the jobs' retries are
// exercised.
const failEvery = 9

// itemCmd is the job command: it logs "JOB ITEM MACHINE INSTANCE PID start
// NS GPUS" (GPUS: its CUDA_VISIBLE_DEVICES, "-" for none), "... alive NS"
// and "... end NS RC" to runLog. A run killed (SIGKILL) writes no end
// line: its last alive line is the last moment it is known to hold its
// GPUs. An alive line forks no date (a loaded host made GPU items twice as
// long): its time is the start's plus the /proc/uptime elapsed since, in
// centiseconds, less one so that it never says later than the truth.
func itemCmd(runLog, failDir string) []string {
	who := "$CSHARE_JOB_ID $CSHARE_ITEM $CSHARE_MACHINE $CSHARE_INSTANCE $$"
	cs := func(v string) string { return "${" + v + "%.*}${" + v + "#*.}" } // "123.45" -> 12345
	script := "t0=$(date +%s%N); read u0 _ < /proc/uptime" +
		"; echo \"" + who + " start $t0 ${CUDA_VISIBLE_DEVICES:--}\" >> " + runLog +
		"; n=$((CSHARE_ITEM % 5 + 3)); if [ -z \"$CUDA_VISIBLE_DEVICES\" ]; then sleep 0.$n" +
		"; else while [ $n -gt 0 ]; do sleep 0.1; n=$((n - 1)); read u _ < /proc/uptime" +
		"; echo \"" + who + " alive $((t0 + (" + cs("u") + " - " + cs("u0") + " - 1) * 10000000))\" >> " + runLog + "; done; fi; rc=0" +
		fmt.Sprintf("; if [ $((CSHARE_ITEM %% %d)) = 0 ] && mkdir %s/$CSHARE_JOB_ID-$CSHARE_ITEM 2>/dev/null; then rc=3; fi", failEvery, failDir) +
		"; echo \"" + who + " end $(date +%s%N) $rc\" >> " + runLog + "; exit $rc"
	return []string{"sh", "-c", script}
}

// hostRun is one real run of an item, read from the run log.
type hostRun struct {
	job                    string
	item                   int64
	machine, instance, pid string
	start, end             time.Time // end is zero when the run wrote no end line
	rc                     int
	gpus                   []string  // its CUDA_VISIBLE_DEVICES; nil for none
	alive                  time.Time // its last alive line (zero if none)
}

// lastSeen is the last moment the run is known to have been running: its
// end line, else its last alive line, else its start.
func (h *hostRun) lastSeen() time.Time {
	switch {
	case !h.end.IsZero():
		return h.end
	case !h.alive.IsZero():
		return h.alive
	}
	return h.start
}

type jobItem struct {
	job  string
	item int64
}

// readRunLog parses the run log at path (none yet: no runs).
//
//lint:ignore U1000 used by chaos_test.go, under the chaos build tag
func readRunLog(path string) (map[jobItem][]*hostRun, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[jobItem][]*hostRun{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseRunLog(f)
}

// parseRunLog parses a run log into runs per job item, in order of start.
func parseRunLog(r io.Reader) (map[jobItem][]*hostRun, error) {
	type key struct{ job, item, machine, instance, pid string }
	open := map[key]*hostRun{}
	runs := map[jobItem][]*hostRun{}
	sc := bufio.NewScanner(r)
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
		case fs[5] == "start" && len(fs) == 8:
			r := &hostRun{job: fs[0], item: item, machine: fs[2], instance: fs[3], pid: fs[4], start: time.Unix(0, ns)}
			if fs[7] != "-" {
				r.gpus = strings.Split(fs[7], ",")
			}
			open[k] = r
			ji := jobItem{fs[0], item}
			runs[ji] = append(runs[ji], r)
		case fs[5] == "alive" && len(fs) == 7:
			r := open[k]
			if r == nil {
				return nil, bad
			}
			r.alive = time.Unix(0, ns)
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
