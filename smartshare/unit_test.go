package smartshare

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

func FuzzDecodeInput(f *testing.F) {
	f.Add([]byte(`{"machines":[{"id":"m1","slots":4}],"jobs":[{"id":"a","items_remaining":10,"max_cpus":"*"}]}`))
	f.Add([]byte(`{"config":{"mode":"none","preempt_policy":"passive","default_max_cpus":"*","max_cpus_limit":3},` +
		`"machines":[{"id":"m1","slots":3,"cores":2000,"gpus":1},{"id":"m2","slots":2}],` +
		`"jobs":[{"id":"a","priority":2,"cpus":2,"max_cpus":5,"items_remaining":9,"cores":1000},{"id":"b","gpus":1,"items_remaining":3}],` +
		`"instances":[{"job":"a","machine":"m1","slot":0,"kind":"secondary","started":4},{"job":"x","machine":"m2","slot":1,"kind":"primary"}]}`))
	f.Add([]byte(`{"jobs":[{"id":"a","cpus":-1}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := DecodeInput(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if totalSlots(in) > 1<<20 {
			return // valid, but slow to plan a thousand times a second
		}
		res := Plan(in)
		if totalSlots(in) > 256 || len(in.Jobs) > 64 {
			return // the checks are quadratic
		}
		if err := checkAll(in, res); err != nil {
			t.Fatalf("invariant broken for %s: %v", data, err)
		}
	})
}

func TestValidateGoInput(t *testing.T) {
	in := Input{Config: DefaultConfig(),
		Machines:  []Machine{{ID: "m1", Slots: 4}},
		Jobs:      []Job{{ID: "a", Priority: 5, CPUs: 1, ItemsRemaining: 3}},
		Instances: []Instance{{Job: "gone", Machine: "m1", Slot: 3, Kind: KindSecondary}}}
	if err := in.Validate(); err != nil {
		t.Fatalf("valid input: %v", err)
	}
	cases := []struct {
		edit func(*Input)
		want string
	}{
		{func(in *Input) { in.Config = Config{} }, `config.mode: "" unknown; allowed: jobs, none`},
		{func(in *Input) { in.Jobs[0].Priority = 0 }, `jobs[0].priority: 0 out of range`},
		{func(in *Input) { in.Jobs[0].ItemsRemaining = -1 }, `jobs[0].items_remaining: -1 is negative`},
		{func(in *Input) { in.Machines[0].Cores = -5 }, `machines[0].cores: -5 is negative`},
		{func(in *Input) { in.Instances[0].Job = "" }, `instances[0].job: empty`},
		{func(in *Input) { in.Instances[0].Slot = -1 }, `instances[0].slot: -1 out of range 0..3 for machine "m1"`},
		{func(in *Input) { in.Machines[0].Slots = 0 }, `instances[0].slot: 3 out of range; machine "m1" has no slots`},
	}
	for _, c := range cases {
		bad := cloneInput(in)
		bad.Jobs = append([]Job(nil), in.Jobs...)
		c.edit(&bad)
		err := bad.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// Plan never panics and stays deterministic even on input Validate
// rejects (duplicate IDs, shared slots, out-of-range values).
func TestPlanInvalidInput(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := genInput(rapid.Bool().Draw(t, "constrained")).Draw(t, "in")
		if len(in.Jobs) > 0 {
			in.Jobs = append(in.Jobs, in.Jobs[0])
			in.Jobs[len(in.Jobs)-1].CPUs = -3
			in.Jobs[0].Priority = rapid.IntRange(-5, 20000).Draw(t, "prio")
		}
		if len(in.Machines) > 0 {
			in.Machines = append(in.Machines, Machine{ID: in.Machines[0].ID, Slots: -2})
		}
		if len(in.Instances) > 0 {
			x := in.Instances[0]
			x.Job = "j0"
			in.Instances = append(in.Instances, x, Instance{Job: "j0", Machine: "nowhere", Slot: 99, Kind: "odd"})
		}
		if rapid.Bool().Draw(t, "extreme") {
			in.Config.MaxCPUsLimit = rapid.SampledFrom([]int{-5, 1 << 40}).Draw(t, "limit")
			in.Config.DefaultMaxCPUs = rapid.SampledFrom([]int{-1 << 40, 1 << 40}).Draw(t, "defmax")
			in.Config.Mode, in.Config.PreemptPolicy = "", "bogus"
			for i := range in.Jobs {
				in.Jobs[i].ItemsRemaining = rapid.SampledFrom([]int{-1, 1 << 62}).Draw(t, "items")
				in.Jobs[i].CPUs = rapid.SampledFrom([]int{-1, 3, 1 << 62}).Draw(t, "cpus")
				in.Jobs[i].Cores = rapid.SampledFrom([]int64{-1, 1 << 62}).Draw(t, "cores")
				in.Jobs[i].GPUs = rapid.SampledFrom([]int{-1, 0, 1 << 30}).Draw(t, "gpus")
			}
			for i := range in.Machines {
				in.Machines[i].Cores = rapid.SampledFrom([]int64{-7, 0, 1 << 62}).Draw(t, "mcores")
				in.Machines[i].GPUs = rapid.SampledFrom([]int{-1, 2, 1 << 30}).Draw(t, "mgpus")
			}
		}
		res := Plan(in)
		if err := checkShuffled(in, res, 2); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMaxCPUsJSON(t *testing.T) {
	for _, c := range []struct {
		in   string
		want MaxCPUs
		out  string
	}{
		{`null`, MaxCPUs{}, `null`},
		{`"*"`, MaxAny, `-1`},
		{`-1`, Max(-1), `-1`},
		{`0`, Max(0), `0`},
		{`50`, Max(50), `50`},
	} {
		var m MaxCPUs
		if err := json.Unmarshal([]byte(c.in), &m); err != nil || m != c.want {
			t.Errorf("%s: got %+v, %v", c.in, m, err)
		}
		b, _ := json.Marshal(m)
		if string(b) != c.out {
			t.Errorf("%s: marshals as %s", c.in, b)
		}
	}
	for _, bad := range []string{`"x"`, `1e3`, `true`, `[]`} {
		var m MaxCPUs
		if err := json.Unmarshal([]byte(bad), &m); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

// The JSON of a Result has exactly the documented shape.
func TestResultJSONShape(t *testing.T) {
	in := Input{Config: DefaultConfig(), Machines: []Machine{{ID: "m1", Slots: 2}},
		Jobs:      []Job{{ID: "a", Priority: 1, CPUs: 1, MaxCPUs: Max(2), ItemsRemaining: 5}, {ID: "b", Priority: 2, CPUs: 1, MaxCPUs: Max(1), ItemsRemaining: 5}},
		Instances: []Instance{{Job: "a", Machine: "m1", Slot: 0, Kind: KindPrimary, Started: 1}, {Job: "a", Machine: "m1", Slot: 1, Kind: KindSecondary, Started: 2}}}
	b, err := json.Marshal(Plan(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"instances":[{"job":"a","machine":"m1","slot":0,"kind":"primary"},{"job":"b","machine":"m1","slot":1,"kind":"primary"}],` +
		`"preempt":[{"job":"a","machine":"m1","slot":1,"mode":"aggressive"}],` +
		`"jobs":[{"id":"a","primaries":1,"secondaries":0,"wanted":2,"preempted":1,"reason":"no_machine_available"},{"id":"b","primaries":1,"secondaries":0,"wanted":1,"preempted":0}],` +
		`"hash":"`
	if !strings.HasPrefix(string(b), want) {
		t.Fatalf("got  %s\nwant %s...", b, want)
	}
	empty, _ := json.Marshal(Plan(Input{Config: DefaultConfig()}))
	if !strings.HasPrefix(string(empty), `{"instances":[],"preempt":[],"jobs":[],"hash":"`) {
		t.Fatalf("empty plan: %s", empty)
	}
}

func TestRunPlanCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "in.json")
	os.WriteFile(good, []byte(`{"machines":[{"id":"m1","slots":3}],"jobs":[{"id":"a","cpus":1,"max_cpus":3,"items_remaining":10}]}`), 0o600)
	var out bytes.Buffer
	if err := RunPlanCommand(good, true, &out); err != nil {
		t.Fatal(err)
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Instances) != 3 || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("json output %q: %v", out.String(), err)
	}
	out.Reset()
	if err := RunPlanCommand(good, false, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"JOB", "PRIMARIES", "SECONDARIES", "PREEMPTED", "REASON", "a ", "hash: " + res.Hash} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"jobs":[{"id":"a","cpus":-1}]}`), 0o600)
	for path, want := range map[string]string{
		bad:                             bad + `: jobs[0].cpus: -1 is negative; allowed: 0 or more`,
		filepath.Join(dir, "none.json"): filepath.Join(dir, "none.json") + `: no such file`,
		"":                              `input: no file given`,
	} {
		err := RunPlanCommand(path, true, &out)
		if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: got %v, want %q", path, err, want)
		}
	}
}

func TestWriteTablePreemptions(t *testing.T) {
	in := Input{Config: Config{Mode: ModeJobs, PreemptPolicy: PolicyPassive, DefaultMaxCPUs: -1, MaxCPUsLimit: 100},
		Machines:  []Machine{{ID: "m1", Slots: 2}},
		Jobs:      []Job{{ID: "hi", Priority: 1, CPUs: 2, ItemsRemaining: 5}, {ID: "lo", Priority: 9, CPUs: 0, MaxCPUs: Max(2), ItemsRemaining: 5}},
		Instances: []Instance{{Job: "lo", Machine: "m1", Slot: 0, Kind: KindSecondary}, {Job: "lo", Machine: "m1", Slot: 1, Kind: KindSecondary}}}
	var out bytes.Buffer
	if err := WriteTable(&out, Plan(in)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"preempt (2):", "m1       0     lo   passive", "preempted_by_higher_priority"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestMonotoneFailsWithResources is the counterexample that keeps
// monotonicity out of the resource-constrained case. j4 (first in priority
// order) runs 3 primaries and 1 secondary on m1 (4000 millicores); j3's
// primary needs 3000 and does not fit beside j4's primaries. Give m0 (no
// declared capacity) one slot: j4's first primary moves there (smallest
// machine first), j3's primary now fits on m1, and a primary outranks j4's
// secondary. j4 goes from 4 instances to 3.
func TestMonotoneFailsWithResources(t *testing.T) {
	in := Input{Config: Config{Mode: ModeJobs, PreemptPolicy: PolicyAggressive, DefaultMaxCPUs: 0, MaxCPUsLimit: 4},
		Machines: []Machine{{ID: "m0", Slots: 0}, {ID: "m1", Slots: 4, Cores: 4000, GPUs: 1}},
		Jobs: []Job{{ID: "j3", Priority: 1, CPUs: 1, Submitted: 1, ItemsRemaining: 1, Cores: 3000},
			{ID: "j4", Priority: 1, CPUs: 3, MaxCPUs: MaxAny, Submitted: 0, ItemsRemaining: 4, Cores: 500}}}
	count := func(r Result, id string) int {
		for _, j := range r.Jobs {
			if j.ID == id {
				return j.Primaries + j.Secondaries
			}
		}
		return -1
	}
	before := Plan(in)
	in.Machines[0].Slots = 1
	after := Plan(in)
	if count(before, "j4") != 4 || count(after, "j4") != 3 || count(before, "j3") != 0 || count(after, "j3") != 1 {
		t.Fatalf("before %+v\nafter %+v", before.Jobs, after.Jobs)
	}
}

// At scale (the radix sort of the job ranking, the hash tables), the
// ranking is priority, submission, ID; shuffled input plans the same; the
// plan is a fixed point.
func TestLargeInput(t *testing.T) {
	in := benchInput(3000, 30000, false)
	for i := range in.Jobs { // many ties on (priority, submitted)
		in.Jobs[i].Submitted = int64(i % 7)
	}
	in.Jobs[5].Submitted = -1 << 60 // wide spread: the unpacked path
	res := Plan(in)
	v := newView(in, res)
	for i, j := range res.Jobs {
		if v.rank[j.ID] != i {
			t.Fatalf("job %s at %d, want %d", j.ID, i, v.rank[j.ID])
		}
	}
	if err := errors.Join(checkCapacity(v), checkCaps(v), checkSummary(v)); err != nil {
		t.Fatal(err)
	}
	if err := checkShuffled(in, res, 2); err != nil {
		t.Fatal(err)
	}
	if err := checkFixedPoint(in, res); err != nil {
		t.Fatal(err)
	}
	in.Jobs[5].Submitted = 3
	res = Plan(in)
	v = newView(in, res)
	for i, j := range res.Jobs {
		if v.rank[j.ID] != i {
			t.Fatalf("packed: job %s at %d, want %d", j.ID, i, v.rank[j.ID])
		}
	}
	if err := checkShuffled(in, res, 2); err != nil {
		t.Fatal(err)
	}
	rin := benchInput(3000, 30000, true)
	rres := Plan(rin)
	if err := errors.Join(checkCapacity(newView(rin, rres)), checkShuffled(rin, rres, 2), checkFixedPoint(rin, rres)); err != nil {
		t.Fatal(err)
	}
}

// TestDiskCountsAgainstTheMachine: a job asking 512 MB of disk per
// instance gets two of a machine's four slots when it offers 1024 MB of
// disk, and the reason names the resource limits.
func TestDiskCountsAgainstTheMachine(t *testing.T) {
	in := Input{Config: DefaultConfig(),
		Machines: []Machine{{ID: "m", Slots: 4, DiskMB: 1024}},
		Jobs:     []Job{{ID: "j", Priority: 1, CPUs: 4, ItemsRemaining: 10, DiskMB: 512}}}
	res := Plan(in)
	if len(res.Instances) != 2 {
		t.Fatalf("%d instances, want 2: %+v", len(res.Instances), res.Instances)
	}
	in.Jobs[0].DiskMB = 0
	if res := Plan(in); len(res.Instances) != 4 {
		t.Fatalf("without disk: %d instances, want 4", len(res.Instances))
	}
}

// TestPlanScratchReuse: the working memory kept between calls changes no
// plan: inputs of growing and shrinking sizes, with and without resources,
// planned in turn and from several goroutines at once, give what each gave
// when planned first.
func TestPlanScratchReuse(t *testing.T) {
	var ins []Input
	for _, sz := range [][2]int{{300, 3000}, {20, 200}, {1000, 5000}, {5, 64}, {300, 3000}} {
		ins = append(ins, benchInput(sz[0], sz[1], false), benchInput(sz[0], sz[1], true))
	}
	ins = append(ins, Input{Config: DefaultConfig()})
	want := make([]Result, len(ins))
	for i, in := range ins {
		want[i] = planWith(&in, false)
		if i%3 == 0 {
			_ = planWith(&ins[len(ins)-1-i], true) // the resource-aware path in between
		}
	}
	for i, in := range ins {
		if got := Plan(in); !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("input %d planned again: hash %s, first %s", i, got.Hash, want[i].Hash)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan string, 4*len(ins))
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range ins {
				i := (k + g) % len(ins)
				if got := Plan(ins[i]); got.Hash != want[i].Hash || len(got.Jobs) != len(want[i].Jobs) {
					errs <- fmt.Sprintf("goroutine %d, input %d: hash %s, want %s", g, i, got.Hash, want[i].Hash)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
