package ledger

import (
	"errors"
	"math"
	"testing"

	"github.com/cshare/cshare/market"
)

// running is a marketWorld with alice's contract for one GPU accepted by
// the host: it runs.
func (w *marketWorld) running(a *actor, gpus int64) string {
	w.t.Helper()
	id := w.request(a, gpus)
	w.ok(w.owner, KindContractAccept, ContractRef{Contract: id})
	if s := w.state(id); s != market.StateRunning {
		w.t.Fatalf("contract %s is %s after its acceptance", id, s)
	}
	return id
}

// TestContractExtendOverflow: the defect. An extension by the
// largest int64 wrapped the contract's end to the year -292274998, which
// every node then read as deleted and free; 1e18 was refused by a check
// that itself overflowed. Every too-large extension is now refused by
// every node's fold, and the contract is left as it was.
func TestContractExtendOverflow(t *testing.T) {
	w := newMarket(t)
	id := w.running(w.alice, 1)
	before := *w.log.State().Contracts[id]
	for _, d := range []int64{math.MaxInt64, math.MaxInt64 - before.End + 1, 1e18, market.MaxDuration, market.MaxDuration - (before.End - before.Start) + 1, 0, -1, math.MinInt64} {
		w.denied(ErrMalformed, w.owner, KindContractExtend, ContractExtend{Contract: id, Duration: d})
	}
	c := w.log.State().Contracts[id]
	if c.End != before.End || w.state(id) != market.StateRunning {
		t.Fatalf("refused extensions moved the end from %d to %d (%s)", before.End, c.End, w.state(id))
	}
	// The most the ten years allow is taken, and nothing more after it.
	w.ok(w.owner, KindContractExtend, ContractExtend{Contract: id, Duration: market.MaxDuration - (before.End - before.Start)})
	c = w.log.State().Contracts[id]
	if c.End-c.Start != market.MaxDuration || c.Cost(c.End).Total <= 0 {
		t.Fatalf("a ten-year contract: start %d end %d cost %+v", c.Start, c.End, c.Cost(c.End))
	}
	w.denied(ErrMalformed, w.owner, KindContractExtend, ContractExtend{Contract: id, Duration: 1})
}

// TestEntryTimeBounded: an entry's time is its author's to choose; every
// node's fold refuses one outside 1970..9999, so no time it records can
// overflow when a duration is added to it (an offer of the year
// 292277026 made a contract end past the largest int64, and read as
// deleted at once).
func TestEntryTimeBounded(t *testing.T) {
	w := newMarket(t)
	for _, at := range []int64{-1, math.MinInt64, market.MaxTime + 1, math.MaxInt64} {
		before := w.log.State().Hash()
		e := sign(t, w.alice, w.org, KindJobSubmit, JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 1, Priority: 5, CPUs: 1}, at, w.heads()...)
		if err := w.mustAdd(e); !errors.Is(err, ErrMalformed) {
			t.Fatalf("a job submitted at %d: %v, want ErrMalformed", at, err)
		}
		st := w.log.State().Clone()
		uncount(st, e) // and its machine's budget (log_budget.go)
		if st.Hash() != before {
			t.Fatalf("an entry at %d changed the state", at)
		}
	}
	// An offer made at the end of time is no offer: its contracts would
	// end past the largest int64.
	late := w.owner.s.SignOffer(w.org, market.Offer{CPUs: 16, MemoryMB: 65536, Price: 1, Created: math.MaxInt64 - market.Hour, Until: math.MaxInt64})
	e := sign(t, w.bob, w.org, KindContractRequest, ContractRequest{Offer: late, Ask: market.Ask{CPUs: 1}, Spec: ContractSpec{Image: "img"}}, math.MaxInt64-1, w.heads()...)
	if err := w.mustAdd(e); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a request at the end of time: %v", err)
	}
	if _, err := late.Verify(w.org); !errors.Is(err, ErrMalformed) {
		t.Fatalf("an offer created in the year 292277026 verifies: %v", err)
	}
	// A genesis too: an org cannot be founded out of range.
	g := sign(t, w.owner, "", KindGenesis, Genesis{Name: "late", OrgKeyID: "k1", Settings: DefaultSettings()}, -5)
	if err := Apply(NewState(), g); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a genesis at -5: %v", err)
	}
}

// TestSettingsFiguresChecked: market.delete_after is added to every
// contract's end; the genesis's settings are checked as org.update's are
// (an org founded with delete_after the largest int64 had every contract
// read as deleted).
func TestSettingsFiguresChecked(t *testing.T) {
	a := newActor(t, 1)
	for _, v := range []int64{-1, market.MaxDuration + 1, math.MaxInt64} {
		set := DefaultSettings()
		set.Market.DeleteAfter = v
		g := sign(t, a, "", KindGenesis, Genesis{Name: "acme", OrgKeyID: "k1", Settings: set}, 1_700_000_000_000)
		if err := Apply(NewState(), g); !errors.Is(err, ErrMalformed) {
			t.Fatalf("a genesis with market.delete_after %d: %v", v, err)
		}
	}
	w := newMarket(t)
	w.denied(ErrMalformed, w.owner, KindOrgUpdate, OrgUpdate{MarketDeleteAfter: i64(math.MaxInt64)})
}

// TestMachineFiguresChecked: a machine's hardware and limits are
// multiplied by the node (cores × 1000 × cpu_limit): a machine.update
// with a figure out of range has no effect on any node.
func TestMachineFiguresChecked(t *testing.T) {
	w := newMarket(t)
	ok := MachineUpdate{Hardware: Hardware{CPUs: 16, MemoryMB: 65536, DiskMB: 1 << 20}, Limits: Limits{CPULimit: 100, MemoryLimit: 65536, DiskLimit: 1 << 20, MaxConcurrentJobs: 16}}
	w.ok(w.alice, KindMachineUpdate, ok)
	for name, mut := range map[string]func(*MachineUpdate){
		"cpus":               func(u *MachineUpdate) { u.Hardware.CPUs = math.MaxInt64 },
		"negative cpus":      func(u *MachineUpdate) { u.Hardware.CPUs = -1 },
		"memory":             func(u *MachineUpdate) { u.Hardware.MemoryMB = math.MinInt64 },
		"disk":               func(u *MachineUpdate) { u.Hardware.DiskMB = math.MaxInt64 },
		"gpu index":          func(u *MachineUpdate) { u.Hardware.GPUs = []GPU{{Index: math.MaxInt64, Name: "x"}} },
		"gpu memory":         func(u *MachineUpdate) { u.Hardware.GPUs = []GPU{{Index: 0, Name: "x", MemoryMB: -1}} },
		"cpu limit":          func(u *MachineUpdate) { u.Limits.CPULimit = math.MaxInt64 / 1000 },
		"memory limit":       func(u *MachineUpdate) { u.Limits.MemoryLimit = -1 },
		"disk limit":         func(u *MachineUpdate) { u.Limits.DiskLimit = math.MaxInt64 },
		"slots":              func(u *MachineUpdate) { u.Limits.MaxConcurrentJobs = math.MaxInt64 },
		"gpu limit device":   func(u *MachineUpdate) { u.Limits.GPUs = []GPULimit{{Device: -1}} },
		"gpu limit memory":   func(u *MachineUpdate) { u.Limits.GPUs = []GPULimit{{Device: 0, MemoryMB: math.MaxInt64}} },
		"negative slots":     func(u *MachineUpdate) { u.Limits.MaxConcurrentJobs = -3 },
		"negative cpu limit": func(u *MachineUpdate) { u.Limits.CPULimit = -100 },
	} {
		u := ok
		mut(&u)
		if _, err := w.write(w.alice, KindMachineUpdate, u); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if m := w.log.State().Machines[w.alice.id]; m.Hardware.CPUs != 16 || m.Limits.CPULimit != 100 {
		t.Fatalf("a refused update changed the machine: %+v %+v", m.Hardware, m.Limits)
	}
}

// TestResultFiguresNormalized: a run's start and duration are added by the
// node (a run's end); the fold keeps them in range, alike on every node,
// without dropping the batch's other results.
func TestResultFiguresNormalized(t *testing.T) {
	w := newMarket(t)
	job := w.submit(w.alice, 3, 0)
	w.ok(w.owner, KindJobResults, JobResults{Job: job, Results: []ItemResult{
		{Item: 1, Code: 0, DurationMS: math.MaxInt64, OutputSize: math.MinInt64, Started: math.MaxInt64},
		{Item: 2, Code: math.MinInt64, DurationMS: -5, OutputSize: math.MaxInt64, Started: -62135596800000},
		{Item: 3, Code: 0, DurationMS: 1500, OutputSize: 10, Started: w.now},
	}})
	j := w.log.State().Jobs[job]
	j.Runs.Each(func(r Run) {
		if r.Started < 0 || r.Started > market.MaxTime || r.DurationMS < 0 || r.DurationMS > MaxRunDurationMS || r.Code < math.MinInt32 {
			t.Errorf("run %+v out of range", r)
		}
	})
	for i, it := range j.Items.Slice() {
		if it.DurationMS < 0 || it.OutputSize < 0 || it.OutputSize > MaxOutputSize {
			t.Errorf("item %d: %+v", i+1, it)
		}
	}
	if it := j.Items.At(2); it.DurationMS != 1500 || it.OutputSize != 10 || it.Status != ItemDone {
		t.Fatalf("an in-range result was changed: %+v", it)
	}
	if j.Items.At(1).Status != ItemFailed || j.Items.At(1).Code != -1 {
		t.Fatalf("an exit code out of int32 reads as -1 (lost): %+v", j.Items.At(1))
	}
}

// TestDatasetFiguresChecked: a dataset's size and block count are bounded.
func TestDatasetFiguresChecked(t *testing.T) {
	w := newMarket(t)
	for _, p := range []DatasetAdd{
		{Name: "a", CID: emptyCID, Size: math.MaxInt64, Blocks: 1, Access: AccessOrg},
		{Name: "b", CID: emptyCID, Size: 1 << 62, Blocks: 1, Access: AccessOrg},
		{Name: "c", CID: emptyCID, Size: 1, Blocks: math.MaxInt64, Access: AccessOrg},
	} {
		w.denied(ErrMalformed, w.alice, KindDatasetAdd, p)
	}
	w.ok(w.alice, KindDatasetAdd, DatasetAdd{Name: "d", CID: emptyCID, Size: MaxDatasetSize, Blocks: 1, Access: AccessOrg})
}
