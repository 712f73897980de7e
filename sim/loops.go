package sim

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/smartshare"
)

// headsLoop is the periodic heads announcement, every 3 intervals.
func (w *world) headsLoop(m *machine) {
	w.announce(m, nil)
	w.at(3*w.cfg.Interval, func() { w.headsLoop(m) })
}

// beat publishes m's heartbeat now.
func (w *world) beat(m *machine) {
	total := p2p.Resources{Cores: 8000, MemoryMB: 32768, DiskMB: 500_000, Slots: int64(w.cfg.Slots)}
	hb := p2p.Heartbeat{Machine: m.ids, Time: w.wall().UnixMilli(), Interval: w.cfg.Interval.Milliseconds(), Total: total, Free: total,
		PlanHash: w.restPlan, Addrs: m.addrs, Version: "sim", Name: m.name}
	if m.planHash != "" {
		hb.PlanHash = m.planHash
	}
	for _, s := range m.slots {
		if !s.active {
			continue
		}
		hb.Instances = append(hb.Instances, p2p.RunningInstance{Job: w.job.id, Slot: int64(s.n), Kind: s.kind, Item: s.item,
			Instance: s.inst, Started: s.started})
		hb.Free.Slots--
	}
	for k, r := range m.results {
		if k == maxFinishedInBeat {
			break
		}
		hb.Instances = append(hb.Instances, p2p.RunningInstance{Job: w.job.id, Slot: -1, Kind: kindFinished, Item: r.Item, Instance: r.Instance})
	}
	for _, h := range m.heads {
		hb.Heads = append(hb.Heads, w.ents[h].e.CID().String())
	}
	m.ownHBSeq = max(m.ownHBSeq+1, uint64(w.wall().UnixNano()))
	hb.Seq = m.ownHBSeq
	if err := hb.Sign(w.org, m.key); err != nil {
		panic(err)
	}
	data, err := p2p.EncodeHeartbeat(&hb)
	if err != nil {
		panic(err)
	}
	w.publish(m, w.newMessage(m, tHeartbeat, data), cHeartbeat)
	m.lastBeat = w.now
}

// periodicBeat is the heartbeat loop: a beat every interval less a random
// tenth.
func (w *world) periodicBeat(m *machine) {
	w.beat(m)
	iv := w.cfg.Interval
	w.at(iv-time.Duration(w.rng.Int64N(int64(iv/10)+1)), func() { w.periodicBeat(m) })
}

// paced is node/sched's pacing of change heartbeats: per machine of the
// org, at least floor, at most a quarter interval.
func (w *world) paced(floor, per time.Duration) time.Duration {
	return max(floor, min(time.Duration(len(w.ms))*per, w.cfg.Interval/4))
}

// markBeat asks for a change heartbeat: it goes out once the changes have
// settled and the gap since the last one has passed.
func (w *world) markBeat(m *machine) {
	if !m.beatDue {
		m.beatDue, m.beatDueAt = true, w.now
	}
	w.scheduleBeat(m)
}

func (w *world) scheduleBeat(m *machine) {
	if m.beatCheck || !m.beatDue {
		return
	}
	settle, gap := w.paced(20*time.Millisecond, 10*time.Millisecond), w.paced(100*time.Millisecond, 10*time.Millisecond)
	at := max(m.beatDueAt+settle, m.lastBeat+gap, w.now)
	m.beatCheck = true
	w.at(at-w.now, func() {
		m.beatCheck = false
		if m.beatDue {
			m.beatDue = false
			w.beat(m)
		}
	})
}

// flushLoop writes one job.results entry a second while results wait.
func (w *world) flushLoop(m *machine) {
	if len(m.results) > 0 {
		for len(m.results) > 0 {
			k := min(len(m.results), 500)
			if _, err := w.write(m, ledger.KindJobResults, ledger.JobResults{Job: w.job.id, Results: m.results[:k]}); err != nil {
				panic(err)
			}
			m.results = m.results[k:]
		}
		m.results = nil
	}
	if !w.stop {
		w.at(time.Second, func() { w.flushLoop(m) })
	}
}

// submitJob has machine 0 submit the job; its plan is computed as every
// node would.
func (w *world) submitJob() {
	m := w.ms[0]
	spec := ledger.JobSpec{Driver: "exec", Cmd: []string{"sh", "-c", "work $ITEM"}, RangeStart: 1, RangeEnd: int64(w.cfg.JobItems),
		Priority: 5, CPUs: 1, Nonce: []byte("sim")}
	// The job's ID is its entry's: sign first, then plan, then fold.
	parents := slices.Clone(m.heads)
	e, err := m.signer.Sign(w.org, ledger.KindJobSubmit, spec, m.headCIDs(w), m.clock, w.wall().UnixMilli())
	if err != nil {
		panic(err)
	}
	id := ledger.JobIDFor(e)
	plan := smartshare.Plan(w.planInput(&smartshare.Job{ID: id, Priority: 5, CPUs: 1, Submitted: 1, ItemsRemaining: w.cfg.JobItems}))
	var slots []dispatch.Slot
	for _, pi := range plan.Instances {
		if pi.Job == id {
			slots = append(slots, dispatch.Slot{Machine: pi.Machine, Slot: pi.Slot})
		}
	}
	w.job = &jobRec{id: id, items: w.cfg.JobItems, plan: plan, owners: dispatch.NewOwners(slots, dispatch.NewRing(dispatch.Seeds(id, slots))),
		buckets: dispatch.NewBuckets(w.cfg.JobItems), submitted: w.now, runs: make([]int32, w.cfg.JobItems)}
	w.window("job", w.now)
	i := w.addEntry(e, parents)
	w.job.entry = i
	w.fold(m, i)
	w.announce(m, e)
}

// startJob is m's scheduler learning of the job: it starts the instances
// the plan gives it, and each takes an item.
func (w *world) startJob(m *machine) {
	j := w.job
	m.planHash = j.plan.Hash
	if m.log == nil {
		m.items = make([]ledger.Item, j.items)
	}
	for _, pi := range j.plan.Instances {
		if pi.Machine != m.ids || pi.Job != j.id {
			continue
		}
		s := m.slots[pi.Slot]
		s.active, s.kind, s.started = true, pi.Kind, w.wall().UnixMilli()
		s.inst = fmt.Sprintf("%016x", w.rng.Uint64())
		if rank, ok := j.owners.Rank[dispatch.Slot{Machine: m.ids, Slot: pi.Slot}]; ok {
			s.mine = j.owners.Ring.ItemsOf(j.buckets, rank)
		}
	}
	w.markBeat(m)
	for _, s := range m.slots {
		if s.active {
			w.next(m, s)
		}
	}
}

// next has slot s take its next item (dispatch.Next over m's view), and
// run it; with nothing to take while items are pending, it asks again in
// half a second.
func (w *world) next(m *machine, s *slot) {
	if !s.active || m.jobDone || s.item >= 0 {
		return
	}
	j := w.job
	now := w.wall()
	v := dispatch.View{Items: w.jobItems(m), RangeStart: 1, Leased: w.leasedFn(m), Alive: w.aliveFn(m),
		Slot: dispatch.Slot{Machine: m.ids, Slot: s.n}, Owners: j.owners, Mine: s.mine}
	if v.Mine == nil {
		v.Buckets = j.buckets
	}
	it, ok := dispatch.Next(v, &s.cursor, now)
	if !ok {
		if !s.retry {
			s.idle = min(max(2*s.idle, idlePoll), maxIdlePoll)
			s.retry = true
			w.at(s.idle, func() { s.retry = false; w.next(m, s) })
		}
		return
	}
	s.idle = 0
	s.item = it
	j.runs[it-1]++
	w.markBeat(m)
	started := now.UnixMilli()
	d := time.Duration(float64(w.cfg.ItemTime) * (0.9 + 0.2*w.rng.Float64()))
	w.at(d, func() {
		m.results = append(m.results, ledger.ItemResult{Item: it, DurationMS: d.Milliseconds(), OutputSize: 1234, Instance: s.inst, Started: started})
		s.item = -1
		w.markBeat(m)
		w.next(m, s)
	})
}

// leasedFn is dispatch.View.Leased for m: items running or finished here,
// held by another machine's latest heartbeat, or dropped from one whose
// results are not here yet (rebuilt after a heartbeat, or 100 ms, as
// node/sched's remote view).
func (w *world) leasedFn(m *machine) func(int64) bool {
	if !m.releasedOK || w.now-m.releasedAt >= 100*time.Millisecond {
		if m.released == nil {
			m.released = map[int64]bool{}
		}
		clear(m.released)
		m.releasedAt, m.releasedOK = w.now, true
		has := func(c cid.Cid) bool { i := w.entryOf(c); return i >= 0 && m.have.has(int(i)) }
		for k := range w.ms {
			if k != m.idx && w.online(m, k) {
				m.leases.Released(w.ms[k].ids, w.job.id, has, m.released)
			}
		}
	}
	return func(it int64) bool {
		if m.remote[it] > 0 || m.released[it] {
			return true
		}
		for _, s := range m.slots {
			if s.item == it {
				return true
			}
		}
		for _, r := range m.results {
			if r.Item == it {
				return true
			}
		}
		return false
	}
}

// A slot with nothing to take asks again after idlePoll, then twice as
// long each time up to maxIdlePoll. A node asks at the next change it hears
// of, every scheduler tick in an org this size, but its plan also shrinks
// as the job's remaining items fall below its slots, stopping the
// instances that would ask; here the plan stays as it was at the
// submission, and the idle instances ask less often instead.
const (
	idlePoll    = time.Second
	maxIdlePoll = 8 * time.Second
)

// machineOf is the index of the machine with ID id. The plan's machine IDs
// are the machines' own strings, so it looks them up by their bytes'
// address first, not by hashing 52 characters on every dispatch.Next
// callback.
func (w *world) machineOf(id string) (int32, bool) {
	if k, ok := w.byPtr[unsafe.StringData(id)]; ok {
		return k, true
	}
	k, ok := w.byID[id]
	return k, ok
}

// online: m has a heartbeat of machine k from the last 3 intervals.
func (w *world) online(m *machine, k int) bool {
	return m.lastHB[k] >= 0 && w.now-m.lastHBAt[k] < 3*w.cfg.Interval
}

// aliveFn is dispatch.View.Alive for m: its own running instances, those
// another online machine announces, and those planned on a machine that
// has not announced this plan yet.
func (w *world) aliveFn(m *machine) func(dispatch.Slot) bool {
	return func(sl dispatch.Slot) bool {
		if sl.Machine == m.ids {
			return sl.Slot < len(m.slots) && m.slots[sl.Slot].active
		}
		k, ok := w.machineOf(sl.Machine)
		if !ok || !w.online(m, int(k)) {
			return false
		}
		info := w.msgs[m.lastHB[k]].hb
		return !info.jobPlan || (sl.Slot >= 0 && sl.Slot < 64 && info.jobSlots&(1<<sl.Slot) != 0)
	}
}
