package ledger

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/market"
)

// The properties of issue 27, item 1: for every entry kind with numeric
// fields, arbitrary 64-bit values in every one of them (and in the
// entry's time) never yield a negative time or cost, an end before a
// start, or any recorded figure out of its range, and two delivery
// orders of the same entries fold to the same state.

// propBase is a market world built once per property: the owner's
// machine hosts two GPUs, alice rents one (her contract runs) and has a
// job of five items, bob is a member.
type propBase struct {
	w       *marketWorld
	entries []*Entry
	run     string // alice's running contract
	job     string // alice's job
}

func newPropBase(t *testing.T) *propBase {
	w := newMarket(t)
	b := &propBase{w: w, run: w.running(w.alice, 1), job: w.submit(w.alice, 5, 1)}
	b.entries = w.log.Entries()
	return b
}

// wild64 draws an int64 from anywhere: the edges, lo..hi, or any 64 bits.
func wild64(t *rapid.T, label string, lo, hi int64) int64 {
	return rapid.OneOf(
		rapid.SampledFrom([]int64{math.MaxInt64, math.MinInt64, -1, 0, 1, market.MaxTime, market.MaxTime + 1,
			market.MaxDuration, market.MaxDuration + 1, math.MaxInt64 / 1000, math.MaxInt64 - 1, math.MinInt64 + 1}),
		rapid.Int64Range(lo, hi),
		rapid.Int64(),
	).Draw(t, label)
}

// wildPtr is nil or a wild value.
func wildPtr(t *rapid.T, label string, lo, hi int64) *int64 {
	if rapid.Bool().Draw(t, label+"_set") {
		v := wild64(t, label, lo, hi)
		return &v
	}
	return nil
}

// step is one entry of a chain: its author, kind, time and payload (which
// may name what the chain's earlier entries made).
type step struct {
	a    *actor
	kind string
	at   int64
	p    func(prev []*Entry) any
}

// at draws an entry time: near the base's now (where entries take
// effect), or anywhere.
func (b *propBase) at(t *rapid.T) int64 {
	return wild64(t, "at", b.w.now, b.w.now+market.Day)
}

func fixed(p any) func([]*Entry) any { return func([]*Entry) any { return p } }

// checkKind checks the property for the chains gen draws: two chains,
// each entry on the one before (the first on the base's heads), signed
// concurrently; folded in two delivery orders (all of one chain first,
// then the other, and the reverse), they give the same state, and its
// figures are in range at every time.
func checkKind(t *testing.T, gen func(rt *rapid.T, b *propBase) []step) {
	b := newPropBase(t)
	heads := b.w.heads()
	rapid.Check(t, func(rt *rapid.T) {
		var chains [2][]*Entry
		nows := []int64{math.MinInt64, -1, 0, b.w.now, market.MaxTime, math.MaxInt64}
		for i := range chains {
			parents := heads
			for _, s := range gen(rt, b) {
				e := sign(t, s.a, b.w.org, s.kind, s.p(chains[i]), s.at, parents...)
				chains[i] = append(chains[i], e)
				parents = []*Entry{e}
				nows = append(nows, s.at, s.at+1)
			}
		}
		l1 := replay(t, slices.Concat(b.entries, chains[0], chains[1]))
		l2 := replay(t, slices.Concat(b.entries, chains[1], chains[0]))
		if h1, h2 := l1.State().Hash(), l2.State().Hash(); h1 != h2 {
			rt.Fatalf("two delivery orders fold to different states")
		}
		checkFiguresInRange(rt, l1.State(), nows)
	})
}

func inTime(v int64) bool { return v >= 0 && v <= market.MaxTime }

// checkFiguresInRange fails on any recorded figure out of its range, and
// on a contract whose cost is negative, whose end is before its start, or
// which reads as deleted before its end unless removed, at any of nows.
func checkFiguresInRange(t *rapid.T, st *State, nows []int64) {
	if !inTime(st.Created) || (st.Deleted && !inTime(st.DeletedAt)) {
		t.Fatalf("org created %d, deleted %d", st.Created, st.DeletedAt)
	}
	if d := st.Settings.Market.DeleteAfter; d < 0 || d > market.MaxDuration {
		t.Fatalf("market.delete_after %d", d)
	}
	if err := ValidateSettings(st.Settings.SmartShare); err != nil {
		t.Fatalf("settings: %v", err)
	}
	if err := ValidatePolicies(st.Settings.Policies); err != nil {
		t.Fatalf("policies: %v", err)
	}
	for _, m := range st.Members {
		if !inTime(m.Joined) {
			t.Fatalf("member %s joined at %d", m.ID, m.Joined)
		}
	}
	for _, m := range st.Machines {
		if !inTime(m.Registered) || m.TotalJobs < 0 {
			t.Fatalf("machine %s registered %d, %d jobs", m.ID, m.Registered, m.TotalJobs)
		}
		for _, h := range m.History {
			if !inTime(h.Time) {
				t.Fatalf("machine %s history at %d", m.ID, h.Time)
			}
		}
		if err := ValidateMachineFigures(m.Hardware, m.Limits); err != nil {
			t.Fatalf("machine %s: %v", m.ID, err)
		}
	}
	for k, n := range st.CapUses {
		if n < 0 {
			t.Fatalf("capability %s used %d times", k, n)
		}
	}
	for _, j := range st.Jobs {
		if !inTime(j.Submitted) || (j.State != JobActive && !inTime(j.Ended)) {
			t.Fatalf("job %s submitted %d, ended %d", j.ID, j.Submitted, j.Ended)
		}
		if err := ValidateJobSpec(j.Spec); err != nil {
			t.Fatalf("job %s: %v", j.ID, err)
		}
		if jobspec.CheckPriority(j.Priority) != nil || (j.MaxCPUs != nil && jobspec.CheckMaxCPUs(*j.MaxCPUs) != nil) {
			t.Fatalf("job %s: priority %d, max cpus %v", j.ID, j.Priority, j.MaxCPUs)
		}
		if j.Started != 0 && (!inTime(j.Started) || j.Started < j.Admitted) || !inTime(j.Admitted) {
			t.Fatalf("job %s admitted %d, started %d", j.ID, j.Admitted, j.Started)
		}
		if j.Done < 0 || j.Failed < 0 || j.Done+j.Failed > int64(j.Items.Len()) || j.Duplicates < 0 {
			t.Fatalf("job %s: %d done, %d failed of %d", j.ID, j.Done, j.Failed, j.Items.Len())
		}
		for i, it := range j.Items.Slice() {
			if it.DurationMS < 0 || it.DurationMS > MaxRunDurationMS || it.OutputSize < 0 || it.OutputSize > MaxOutputSize || it.Attempts < 0 || it.Failures < 0 {
				t.Fatalf("job %s item %d: %+v", j.ID, i, it)
			}
		}
		j.Runs.Each(func(r Run) {
			if r.Started < 0 || r.Started > market.MaxTime || r.DurationMS < 0 || r.DurationMS > MaxRunDurationMS || r.Code < math.MinInt32 || r.Code > math.MaxInt32 {
				t.Fatalf("job %s run %+v", j.ID, r)
			}
		})
	}
	for _, d := range st.Datasets {
		if d.Size < 0 || d.Size > MaxDatasetSize || d.Blocks < 1 || d.Blocks > MaxDatasetBlocks || !inTime(d.Added) {
			t.Fatalf("dataset %+v", d)
		}
	}
	p := st.MarketPolicy()
	for _, c := range st.Contracts {
		if c.Offer.Check() != nil {
			t.Fatalf("contract %s on offer %+v", c.ID, c.Offer)
		}
		for _, now := range nows {
			if err := c.CheckFigures(now, p); err != nil {
				t.Fatalf("%v", err)
			}
		}
	}
	for _, now := range nows {
		renters, hosts := market.Usage(st.MarketContracts(""), now)
		for _, a := range append(renters, hosts...) {
			if a.Cost.Total < 0 || a.Cost.Compute < 0 || a.Cost.Storage < 0 {
				t.Fatalf("usage at %d: %+v", now, a)
			}
		}
		for _, r := range ContractReservations(st, now) {
			if r.CPUMilli < 0 || r.MemoryMB < 0 || r.Slots < 0 {
				t.Fatalf("reservation at %d: %+v", now, r)
			}
		}
	}
}

// TestPropertyFiguresGenesis: org.genesis (its settings and time).
func TestPropertyFiguresGenesis(t *testing.T) {
	a := newActor(t, 1)
	rapid.Check(t, func(rt *rapid.T) {
		set := DefaultSettings()
		set.SmartShare.DefaultMaxCPUs = wild64(rt, "default_max_cpus", -1, 1<<20)
		set.SmartShare.MaxCPUsLimit = wild64(rt, "max_cpus_limit", 0, 1<<20)
		set.Market.DeleteAfter = wild64(rt, "delete_after", 0, market.MaxDuration)
		at := wild64(rt, "at", 0, market.MaxTime)
		g := sign(t, a, "", KindGenesis, Genesis{Name: "acme", OrgKeyID: "k1", Settings: set}, at)
		s1, s2 := NewState(), NewState()
		err1, err2 := Apply(s1, g), Apply(s2, g)
		if (err1 == nil) != (err2 == nil) || s1.Hash() != s2.Hash() {
			rt.Fatalf("the same genesis folds differently: %v / %v", err1, err2)
		}
		if err1 == nil {
			checkFiguresInRange(rt, s1, []int64{math.MinInt64, 0, at, math.MaxInt64})
		}
	})
}

// TestPropertyFiguresOrgUpdate: org.update.
func TestPropertyFiguresOrgUpdate(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		u := OrgUpdate{DefaultMaxCPUs: wildPtr(rt, "default_max_cpus", -1, 1<<20), MaxCPUsLimit: wildPtr(rt, "max_cpus_limit", 0, 1<<20),
			MarketDeleteAfter: wildPtr(rt, "delete_after", 0, market.MaxDuration)}
		return []step{{b.w.owner, KindOrgUpdate, b.at(rt), fixed(u)}}
	})
}

// TestPropertyFiguresPolicies: org.update's policies, then a job's start
// and expiry under them at any times: no policy out of range, no start
// before its job was let run or after its entry, the same state in both
// delivery orders.
func TestPropertyFiguresPolicies(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		set := map[string]int64{}
		for _, n := range PolicyNames {
			if rapid.Bool().Draw(rt, n+"_set") {
				set[n] = wild64(rt, n, 0, market.Day)
			}
		}
		ref := fixed(JobRef{Job: b.job})
		return []step{{b.w.owner, KindOrgUpdate, b.at(rt), fixed(OrgUpdate{Policies: set})},
			{b.w.owner, KindJobStart, b.at(rt), ref}, {b.w.owner, KindJobExpire, b.at(rt), ref}}
	})
}

// TestPropertyFiguresMachineRegister: machine.register (the capability's
// uses and expiry, the witness's time).
func TestPropertyFiguresMachineRegister(t *testing.T) {
	joiners := []*actor{newActor(t, 70), newActor(t, 71), newActor(t, 72)}
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		j := joiners[rapid.IntRange(0, len(joiners)-1).Draw(rt, "joiner")]
		c := b.w.owner.s.SignCapability(Capability{Org: b.w.org, Kind: CapInvite, ID: "inv", Role: RoleMember,
			Uses: wild64(rt, "uses", 0, 3), Expires: wild64(rt, "expires", 0, market.MaxTime)})
		wt := b.w.owner.s.SignWitness(c, j.id, wild64(rt, "witness_time", b.w.now, b.w.now+market.Hour))
		return []step{{j, KindMachineReg, b.at(rt), fixed(MachineRegister{Cap: c, Witness: &wt})}}
	})
}

// TestPropertyFiguresMachineUpdate: machine.update (hardware and limits).
func TestPropertyFiguresMachineUpdate(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		u := MachineUpdate{
			Hardware: Hardware{CPUs: wild64(rt, "cpus", 0, 64), MemoryMB: wild64(rt, "mem", 0, 1<<20), DiskMB: wild64(rt, "disk", 0, 1<<20),
				GPUs: []GPU{{Index: wild64(rt, "gpu_index", 0, 3), Name: "T4", MemoryMB: wild64(rt, "gpu_mem", 0, 1<<15)}}},
			Limits: Limits{CPULimit: wild64(rt, "cpu_limit", 0, 100), MemoryLimit: wild64(rt, "mem_limit", 0, 1<<20), DiskLimit: wild64(rt, "disk_limit", 0, 1<<20),
				MaxConcurrentJobs: wild64(rt, "slots", 0, 256), GPUs: []GPULimit{{Device: wild64(rt, "gpu_device", 0, 3), MemoryMB: wild64(rt, "gpu_limit_mem", 0, 1<<15)}}},
		}
		a := rapid.SampledFrom([]*actor{b.w.owner, b.w.alice}).Draw(rt, "machine")
		return []step{{a, KindMachineUpdate, b.at(rt), fixed(u)}}
	})
}

// TestPropertyFiguresJobSubmit: job.submit.
func TestPropertyFiguresJobSubmit(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		s := JobSpec{Driver: "exec", Cmd: []string{"true"}, Cores: wild64(rt, "cores", 0, 4000), MemoryMB: wild64(rt, "mem", 0, 1<<14),
			GPUs: wild64(rt, "gpus", 0, 4), RangeStart: wild64(rt, "start", 0, 10), RangeEnd: wild64(rt, "end", 0, 20),
			Priority: wild64(rt, "priority", 1, 9999), CPUs: wild64(rt, "cpus", 1, 8), MaxCPUs: wildPtr(rt, "max_cpus", -1, 8),
			Retries: wild64(rt, "retries", 0, 3), Nonce: []byte{byte(rapid.IntRange(0, 255).Draw(rt, "nonce"))}}
		return []step{{b.w.alice, KindJobSubmit, b.at(rt), fixed(s)}}
	})
}

// TestPropertyFiguresJobModify: job.modify.
func TestPropertyFiguresJobModify(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		m := JobModify{Job: b.job, MaxCPUs: wildPtr(rt, "max_cpus", -1, 8), Priority: wildPtr(rt, "priority", 1, 9999)}
		return []step{{b.w.alice, KindJobModify, b.at(rt), fixed(m)}}
	})
}

// TestPropertyFiguresJobResults: job.results.
func TestPropertyFiguresJobResults(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		var rs []ItemResult
		for range rapid.IntRange(1, 3).Draw(rt, "results") {
			rs = append(rs, ItemResult{Item: wild64(rt, "item", 1, 5), Code: wild64(rt, "code", -1, 2), DurationMS: wild64(rt, "duration", 0, market.Hour),
				OutputSize: wild64(rt, "output", 0, 1<<20), Started: wild64(rt, "started", b.w.now, b.w.now+market.Hour), Stopped: rapid.Bool().Draw(rt, "stopped")})
		}
		return []step{{b.w.owner, KindJobResults, b.at(rt), fixed(JobResults{Job: b.job, Results: rs})}}
	})
}

// TestPropertyFiguresDatasetAdd: dataset.add.
func TestPropertyFiguresDatasetAdd(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		d := DatasetAdd{Name: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "name"), CID: emptyCID,
			Size: wild64(rt, "size", 0, 1<<40), Blocks: wild64(rt, "blocks", 1, 1<<20), Access: AccessOrg}
		return []step{{b.w.alice, KindDatasetAdd, b.at(rt), fixed(d)}}
	})
}

// contractOf names the contract the chain's request made (the base's
// running one if the chain has none).
func (b *propBase) contractOf(prev []*Entry) string {
	for _, e := range prev {
		if e.Kind == KindContractRequest {
			return ContractIDFor(e)
		}
	}
	return b.run
}

// TestPropertyFiguresContractRequest: contract.request (its offer's and
// ask's figures), then the host's acceptance and extension and the
// renter's stop and start, each at any time.
func TestPropertyFiguresContractRequest(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		created := wild64(rt, "created", b.w.now-market.Hour, b.w.now)
		o := market.Offer{CPUs: wild64(rt, "cpus", 1, 16), MemoryMB: wild64(rt, "mem", 1, 65536), DiskMB: wild64(rt, "disk", 0, 1<<20),
			Price: wild64(rt, "price", 0, market.MaxPrice), DiskPrice: wild64(rt, "disk_price", 0, market.MaxPrice),
			Created: created, Until: created + wild64(rt, "window", market.Hour, market.MaxDuration), MinDuration: wild64(rt, "min_duration", 0, market.Hour)}
		if rapid.Bool().Draw(rt, "gpus") {
			o.GPUs = []market.GPU{{Index: 1, Name: "RTX 4090", MemoryMB: 24576}}
		}
		so := b.w.owner.s.SignOffer(b.w.org, o)
		ask := market.Ask{GPUs: wild64(rt, "ask_gpus", 0, 1), CPUs: wild64(rt, "ask_cpus", 0, 4), DiskMB: wild64(rt, "ask_disk", 0, 1024), Duration: wild64(rt, "ask_for", 0, market.Day)}
		ref := func(prev []*Entry) any { return ContractRef{Contract: b.contractOf(prev)} }
		return []step{
			{b.w.bob, KindContractRequest, b.at(rt), fixed(ContractRequest{Offer: so, Ask: ask, Spec: ContractSpec{Image: "img"}})},
			{b.w.owner, KindContractAccept, b.at(rt), ref},
			{b.w.bob, KindContractStop, b.at(rt), ref},
			{b.w.bob, KindContractStart, b.at(rt), ref},
			{b.w.owner, KindContractExtend, b.at(rt), func(prev []*Entry) any {
				return ContractExtend{Contract: b.contractOf(prev), Duration: wild64(rt, "by", 1, market.Day)}
			}},
		}
	})
}

// TestPropertyFiguresContractExtend: contract.extend of the running
// contract, twice, by any amounts at any times.
func TestPropertyFiguresContractExtend(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		var out []step
		for i := range 2 {
			d := wild64(rt, fmt.Sprintf("by%d", i), 1, market.MaxDuration)
			out = append(out, step{b.w.owner, KindContractExtend, b.at(rt), fixed(ContractExtend{Contract: b.run, Duration: d})})
		}
		return out
	})
}

// TestPropertyFiguresContractTimes: the kinds whose only figure is their
// time (contract.accept, reject, stop, start, rm; member.remove, which
// ends a renter's contracts; org.delete, which ends them all), in any
// order at any times.
func TestPropertyFiguresContractTimes(t *testing.T) {
	checkKind(t, func(rt *rapid.T, b *propBase) []step {
		req := step{b.w.bob, KindContractRequest, b.at(rt), fixed(ContractRequest{Offer: b.w.offer, Ask: market.Ask{GPUs: 1, Duration: wild64(rt, "ask_for", 0, market.Day)}, Spec: ContractSpec{Image: "img"}})}
		out := []step{req}
		ref := func(prev []*Entry) any { return ContractRef{Contract: b.contractOf(prev)} }
		for range rapid.IntRange(1, 5).Draw(rt, "steps") {
			s := rapid.SampledFrom([]step{
				{b.w.owner, KindContractAccept, 0, ref},
				{b.w.owner, KindContractReject, 0, func(prev []*Entry) any { return ContractReject{Contract: b.contractOf(prev), Reason: "no"} }},
				{b.w.bob, KindContractStop, 0, ref},
				{b.w.bob, KindContractStart, 0, ref},
				{b.w.bob, KindContractRm, 0, ref},
				{b.w.alice, KindContractStop, 0, fixed(ContractRef{Contract: b.run})},
				{b.w.alice, KindContractRm, 0, fixed(ContractRef{Contract: b.run})},
				{b.w.owner, KindMemberRemove, 0, fixed(MemberRef{Member: b.w.bob.id})},
				{b.w.alice, KindMemberRemove, 0, fixed(MemberRef{Member: b.w.alice.id})},
				{b.w.owner, KindOrgDelete, 0, fixed(OrgDelete{Name: "acme"})},
			}).Draw(rt, "step")
			s.at = b.at(rt)
			out = append(out, s)
		}
		return out
	})
}
