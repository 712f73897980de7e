package chaos

// GPU exclusivity, without the chaos tag: the check is a pure function of
// the run log, tested here in `go test ./...`; TestChaos applies it.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// gpuOverlap is two runs on one machine that held one GPU at once.
type gpuOverlap struct {
	machine, gpu string
	a, b         *hostRun // a started first
}

// gpuOverlaps checks that no two runs on one machine held one GPU at once.
// A run holds the GPUs of its CUDA_VISIBLE_DEVICES from its start line to
// the last moment it is known to have run (hostRun.lastSeen): both are
// readings of the host's clock taken inside the run, so every overlap found
// happened (a run killed between two alive lines may hide a shorter one).
// One machine's node alone decides its GPUs, so no partition, pause or
// skew excuses an overlap. It returns how many runs held a GPU and the
// overlaps, each later run paired with the earlier one that outlived its
// start the longest, ordered by machine, GPU and start.
func gpuOverlaps(runs map[jobItem][]*hostRun) (held int, out []gpuOverlap) {
	type mg struct{ machine, gpu string }
	by := map[mg][]*hostRun{}
	for _, rs := range runs {
		for _, h := range rs {
			if len(h.gpus) > 0 {
				held++
			}
			for _, g := range h.gpus {
				by[mg{h.machine, g}] = append(by[mg{h.machine, g}], h)
			}
		}
	}
	keys := make([]mg, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].machine != keys[j].machine {
			return keys[i].machine < keys[j].machine
		}
		return keys[i].gpu < keys[j].gpu
	})
	for _, k := range keys {
		rs := by[k]
		sort.Slice(rs, func(i, j int) bool {
			if !rs[i].start.Equal(rs[j].start) {
				return rs[i].start.Before(rs[j].start)
			}
			return rs[i].pid < rs[j].pid
		})
		var longest *hostRun // of the runs started so far, the one last seen latest
		for _, h := range rs {
			if longest != nil && h.start.Before(longest.lastSeen()) {
				out = append(out, gpuOverlap{machine: k.machine, gpu: k.gpu, a: longest, b: h})
			}
			if longest == nil || h.lastSeen().After(longest.lastSeen()) {
				longest = h
			}
		}
	}
	return held, out
}

// The check over run-log lines: only runs on one machine that held one
// GPU at moments both are known to have been running overlap.
func TestGPUOverlaps(t *testing.T) {
	// Lines "JOB ITEM MACHINE INSTANCE PID start|alive|end NS [GPUS|RC]",
	// times in ms.
	line := func(item int, machine, pid, what string, ms int, rest string) string {
		s := fmt.Sprintf("j %d %s i-%s %s %s %d", item, machine, pid, pid, what, int64(ms)*1e6)
		if rest != "" {
			s += " " + rest
		}
		return s
	}
	run := func(item int, machine, pid, gpus string, start, end int) []string {
		return []string{line(item, machine, pid, "start", start, gpus), line(item, machine, pid, "end", end, "0")}
	}
	killed := func(item int, machine, pid, gpus string, start int, alive ...int) []string {
		l := []string{line(item, machine, pid, "start", start, gpus)}
		for _, a := range alive {
			l = append(l, line(item, machine, pid, "alive", a, ""))
		}
		return l
	}
	cat := func(ls ...[]string) []string { return slices.Concat(ls...) }
	for _, c := range []struct {
		name  string
		lines []string
		held  int
		want  []string // "machine gpu pidA pidB"
	}{
		{"one after the other", cat(run(1, "A", "1", "G0", 0, 500), run(2, "A", "2", "G0", 500, 900)), 2, nil},
		{"overlap", cat(run(1, "A", "1", "G0", 0, 500), run(2, "A", "2", "G0", 499, 900)), 2, []string{"A G0 1 2"}},
		{"other machine", cat(run(1, "A", "1", "G0", 0, 500), run(2, "B", "2", "G0", 100, 900)), 2, nil},
		{"other GPU", cat(run(1, "A", "1", "G0", 0, 500), run(2, "A", "2", "G1", 100, 900)), 2, nil},
		{"no GPU", cat(run(1, "A", "1", "G0", 0, 500), run(2, "A", "2", "-", 100, 900)), 1, nil},
		{"two GPUs, one shared", cat(run(1, "A", "1", "G0,G1", 0, 500), run(2, "A", "2", "G1", 100, 900)), 2, []string{"A G1 1 2"}},
		{"killed, seen alive after the next start", cat(killed(1, "A", "1", "G0", 0, 100, 200), run(2, "A", "2", "G0", 150, 900)), 2, []string{"A G0 1 2"}},
		{"killed, last seen before the next start", cat(killed(1, "A", "1", "G0", 0, 100), run(2, "A", "2", "G0", 150, 900)), 2, nil},
		{"killed at once", cat(killed(1, "A", "1", "G0", 0), run(2, "A", "2", "G0", 1, 900)), 2, nil},
		{"a long run outlives the next two", cat(run(1, "A", "1", "G0", 0, 1000), run(2, "A", "2", "G0", 100, 200), run(3, "A", "3", "G0", 300, 400)), 3,
			[]string{"A G0 1 2", "A G0 1 3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs, err := parseRunLog(strings.NewReader(strings.Join(c.lines, "\n") + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			held, ov := gpuOverlaps(runs)
			var got []string
			for _, o := range ov {
				got = append(got, fmt.Sprintf("%s %s %s %s", o.machine, o.gpu, o.a.pid, o.b.pid))
			}
			if held != c.held || !slices.Equal(got, c.want) {
				t.Errorf("gpuOverlaps = %d held, %v; want %d, %v", held, got, c.held, c.want)
			}
		})
	}
	if _, err := parseRunLog(strings.NewReader(line(1, "A", "1", "alive", 5, "") + "\n")); err == nil {
		t.Error("an alive line of no started run parsed")
	}
}

// The item command's lines name the GPUs its environment gives it and
// parse back into one run.
func TestItemCmdLogsGPUs(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	runLog := filepath.Join(dir, "runs.log")
	for _, c := range []struct {
		item int
		cuda string
	}{{1, "GPU-recorded-1"}, {2, ""}} {
		argv := itemCmd(runLog, dir)
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CSHARE_JOB_ID=j", fmt.Sprintf("CSHARE_ITEM=%d", c.item),
			"CSHARE_MACHINE=m", "CSHARE_INSTANCE=j-s0-1", "CUDA_VISIBLE_DEVICES=" + c.cuda}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("item %d: %v: %s", c.item, err, out)
		}
	}
	f, err := os.Open(runLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs, err := parseRunLog(f)
	if err != nil {
		t.Fatal(err)
	}
	g := runs[jobItem{"j", 1}]
	if len(g) != 1 || !slices.Equal(g[0].gpus, []string{"GPU-recorded-1"}) || g[0].rc != 0 || g[0].end.IsZero() ||
		g[0].alive.Before(g[0].start) || g[0].end.Before(g[0].alive) {
		t.Errorf("the GPU run: %+v", g)
	}
	n := runs[jobItem{"j", 2}]
	if len(n) != 1 || n[0].gpus != nil || !n[0].alive.IsZero() || n[0].end.IsZero() {
		t.Errorf("the run without GPUs: %+v", n)
	}
}
