package sim

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/smartshare"
)

// machine is one simulated machine: its gossip state, its validators'
// state, what it has of the ledger, and its scheduler.
type machine struct {
	idx    int
	ids    string // peer ID
	name   string
	key    crypto.PrivKey
	signer *ledger.Signer
	addrs  []string

	conns   []int32
	mesh    [2][]int32
	recent  [2][3][]int32 // message cache for lazy gossip: the last 3 seconds
	upFree  time.Duration // uplink busy until
	cpuFree time.Duration // validation busy until
	tx, rx  counter

	// Validators' state, per sender machine.
	hbSeq, headsSeq []uint64
	lastHB          []int32 // latest accepted heartbeat (message index), -1: none
	lastHBAt        []time.Duration
	hbHeads         [][]int32 // the heads a machine's last heartbeat named, when all were here

	// The ledger as this machine has it.
	have    bitset // entries (by index)
	heads   []int32
	clock   uint64
	log     *ledger.Log // folders only
	waiting []int32     // received, parents missing
	wanted  map[int32]time.Duration
	items   []ledger.Item // non-folders: the job's agenda
	done    int           // non-folders: items done

	// Scheduler.
	leases     dispatch.Leases
	remote     map[int64]int32 // items held by other machines' latest heartbeats
	released   map[int64]bool  // items others dropped whose results are not here yet
	releasedAt time.Duration
	releasedOK bool
	slots      []*slot
	results    []ledger.ItemResult // finished, not yet flushed
	ownHBSeq   uint64
	ownHeadSeq uint64
	beatDue    bool
	beatDueAt  time.Duration
	lastBeat   time.Duration
	beatCheck  bool
	planHash   string
	jobDone    bool
}

// slot is one of a machine's slots and the instance it runs.
type slot struct {
	n       int
	active  bool
	inst    string
	kind    string
	started int64
	item    int64 // -1: none
	cursor  dispatch.Cursor
	mine    []int32
	retry   bool
	idle    time.Duration // the wait before it asks again, doubling while it finds nothing
}

// heartbeatInfo is what the stateless checks decoded of a heartbeat.
type heartbeatInfo struct {
	hb    p2p.Heartbeat
	from  int32
	held  []dispatch.Lease
	heads []int32 // entry indexes of its heads (-1: not an entry of this org)
	// For dispatch.View.Alive: whether it announces the job's plan, and
	// the slots in which it runs an instance of the job (a bit each).
	jobPlan  bool
	jobSlots uint64
}

// headsInfo is what the stateless checks decoded of a heads announcement.
type headsInfo struct {
	from   int32
	seq    uint64
	heads  []int32
	pushed []int32 // entries that decoded and verified
}

// entryRec is one ledger entry of the org.
type entryRec struct {
	e       *ledger.Entry
	results *ledger.JobResults // a job.results entry's payload, once decoded
	parents []int32
	at      time.Duration
	reached int32
	lastAt  time.Duration
}

func (w *world) newMachine(i int) (*machine, error) {
	k, err := keyFrom(w.rng)
	if err != nil {
		return nil, err
	}
	s, err := ledger.NewSigner(k)
	if err != nil {
		return nil, err
	}
	n := w.cfg.Machines
	m := &machine{idx: i, ids: s.ID().String(), name: fmt.Sprintf("m%04d", i), key: k, signer: s,
		hbSeq: make([]uint64, n), headsSeq: make([]uint64, n), lastHB: make([]int32, n), lastHBAt: make([]time.Duration, n),
		hbHeads: make([][]int32, n), wanted: map[int32]time.Duration{}, remote: map[int64]int32{}}
	for j := range m.lastHB {
		m.lastHB[j] = -1
	}
	ip := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
	m.addrs = []string{"/ip4/" + ip + "/tcp/4001/p2p/" + m.ids, "/ip4/" + ip + "/udp/4001/quic-v1/p2p/" + m.ids}
	if i < w.cfg.Folders {
		m.log = ledger.NewLog()
	}
	for k := 0; k < w.cfg.Slots; k++ {
		m.slots = append(m.slots, &slot{n: k, item: -1})
	}
	w.byID[m.ids] = int32(i)
	w.byPtr[unsafe.StringData(m.ids)] = int32(i)
	w.ms = append(w.ms, m)
	return m, nil
}

// addEntry records a new entry of the org.
func (w *world) addEntry(e *ledger.Entry, parents []int32) int32 {
	i := int32(len(w.ents))
	w.ents = append(w.ents, &entryRec{e: e, parents: parents, at: w.now})
	w.byCID[e.CID().KeyString()] = i
	return i
}

// entryOf is the index of the entry with CID c, or -1.
func (w *world) entryOf(c cid.Cid) int32 {
	if i, ok := w.byCID[c.KeyString()]; ok {
		return i
	}
	return -1
}

func (m *machine) headCIDs(w *world) []cid.Cid {
	out := make([]cid.Cid, len(m.heads))
	for i, h := range m.heads {
		out[i] = w.ents[h].e.CID()
	}
	return out
}

// take adds entry i to m's ledger when its parents are here (and then the
// waiting entries it completes), else keeps it waiting.
func (w *world) take(m *machine, i int32) {
	if m.have.has(int(i)) || slices.Contains(m.waiting, i) {
		return
	}
	m.waiting = append(m.waiting, i)
	for progress := true; progress; {
		progress = false
		for k := 0; k < len(m.waiting); k++ {
			j := m.waiting[k]
			ok := true
			for _, p := range w.ents[j].parents {
				if !m.have.has(int(p)) {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			m.waiting = slices.Delete(m.waiting, k, k+1)
			w.fold(m, j)
			progress = true
			break
		}
	}
}

// fold adds entry i, whose parents m has, to m's ledger.
func (w *world) fold(m *machine, i int32) {
	if m.have.has(int(i)) {
		return
	}
	r := w.ents[i]
	growSet(&m.have, int(i))
	heads := m.heads[:0]
	for _, h := range m.heads {
		if !slices.Contains(r.parents, h) {
			heads = append(heads, h)
		}
	}
	m.heads = append(heads, i)
	slices.Sort(m.heads)
	m.clock = max(m.clock, r.e.Clock)
	r.reached++
	r.lastAt = w.now
	delete(m.wanted, i)
	if m.log != nil {
		start := time.Now()
		if _, err := m.log.AddBatch([]*ledger.Entry{r.e}); err != nil {
			panic(fmt.Sprintf("sim: machine %d cannot fold entry %d: %v", m.idx, i, err))
		}
		w.foldCPU.n++
		w.foldCPU.sum += time.Since(start)
	}
	j := w.job
	if j == nil {
		return
	}
	switch {
	case i == j.entry:
		w.startJob(m)
	case r.e.Kind == ledger.KindJobResults && m.log == nil && m.items != nil:
		if r.results == nil { // decoded once: a function of the entry's bytes
			r.results = &ledger.JobResults{}
			if err := ledger.DecodePayload(r.e.Payload, r.results); err != nil {
				r.results.Job = ""
			}
		}
		if r.results.Job != j.id {
			return
		}
		for _, res := range r.results.Results {
			it := &m.items[res.Item-1]
			it.Attempts++
			if it.Status == ledger.ItemPending && !res.Stopped && res.Code == 0 {
				it.Status, it.Machine = ledger.ItemDone, r.e.AuthorString()
				m.done++
			}
		}
	}
	if r.e.Kind == ledger.KindJobResults {
		w.checkDone(m)
	}
}

// jobItems is the job's agenda as m knows it.
func (w *world) jobItems(m *machine) ledger.ItemList {
	if m.log != nil {
		if j := m.log.State().Jobs[w.job.id]; j != nil {
			return j.Items
		}
		return ledger.ItemList{}
	}
	return ledger.ItemsOf(m.items...)
}

func (w *world) doneCount(m *machine) int {
	if m.log != nil {
		if j := m.log.State().Jobs[w.job.id]; j != nil {
			return int(j.Done + j.Failed)
		}
		return 0
	}
	return m.done
}

// checkDone notes when m first sees every item of the job finished, and
// stops the run once every machine has (and their last messages are out).
func (w *world) checkDone(m *machine) {
	j := w.job
	if m.jobDone || w.doneCount(m) < j.items {
		return
	}
	m.jobDone = true
	for _, s := range m.slots {
		s.active = false
	}
	if j.seenDone == 0 {
		j.doneAt = w.now
	}
	j.seenDone++
	if j.seenDone == len(w.ms) {
		j.allDoneAt = w.now
		w.closeWindow(w.windows[len(w.windows)-1])
		w.at(5*time.Second, func() { w.stop = true })
	}
}

// stateless runs msg's stateless checks (once, or at every machine with
// VerifyAll) and reports their verdict.
func (w *world) stateless(msg *message) error {
	if msg.checked && !w.cfg.VerifyAll {
		return msg.err
	}
	start := time.Now()
	var err error
	switch msg.topic {
	case tHeartbeat:
		var info *heartbeatInfo
		info, err = w.checkHeartbeat(msg.data)
		if msg.hb == nil {
			msg.hb = info
		}
	case tLedger:
		var info *headsInfo
		info, err = w.checkHeads(msg.data)
		if msg.heads == nil {
			msg.heads = info
		}
	}
	w.checkCPU[msg.topic].n++
	w.checkCPU[msg.topic].sum += time.Since(start)
	if msg.checked && (err == nil) != (msg.err == nil) {
		panic(fmt.Sprintf("sim: the checks of message %d gave %v, then %v", msg.idx, msg.err, err))
	}
	msg.checked, msg.err = true, err
	return err
}

func (w *world) checkHeartbeat(data []byte) (*heartbeatInfo, error) {
	hb, err := p2p.DecodeVerifyHeartbeat(w.org, data)
	if err != nil {
		return nil, err
	}
	from, ok := w.byID[hb.Machine]
	if !ok {
		return nil, fmt.Errorf("sim: heartbeat of unknown machine %s", hb.Machine)
	}
	info := &heartbeatInfo{hb: hb, from: from, jobPlan: w.job != nil && hb.PlanHash == w.job.plan.Hash}
	finished := 0
	for _, ri := range hb.Instances {
		if ri.Kind == kindFinished {
			if finished++; finished > maxFinishedInBeat {
				continue
			}
		}
		if ri.Item >= 0 {
			info.held = append(info.held, dispatch.Lease{Job: ri.Job, Item: ri.Item})
		}
		if ri.Kind != kindFinished && w.job != nil && ri.Job == w.job.id && ri.Slot >= 0 && ri.Slot < 64 {
			info.jobSlots |= 1 << ri.Slot
		}
	}
	for _, h := range hb.Heads {
		c, err := cid.Decode(h)
		if err != nil {
			return nil, fmt.Errorf("sim: heartbeat head %q: %v", h, err)
		}
		info.heads = append(info.heads, w.entryOf(c))
	}
	return info, nil
}

// As node/sched's: a finished item's lease in a heartbeat, and how many count.
const (
	kindFinished      = "finished"
	maxFinishedInBeat = 300
)

func (w *world) checkHeads(data []byte) (*headsInfo, error) {
	from, seq, payload, err := p2p.DecodeVerifyHeads(w.org, data)
	if err != nil {
		return nil, err
	}
	fi, ok := w.byID[from.String()]
	if !ok {
		return nil, fmt.Errorf("sim: heads from unknown machine %s", from)
	}
	heads, pushed, err := replica.ParseHeadsPayload(payload)
	if err != nil {
		return nil, err
	}
	info := &headsInfo{from: fi, seq: seq}
	for _, h := range heads {
		info.heads = append(info.heads, w.entryOf(h))
	}
	es, _ := ledger.DecodeBatch(pushed)
	for _, e := range es {
		if e != nil && e.Org == w.org {
			if i := w.entryOf(e.CID()); i >= 0 {
				info.pushed = append(info.pushed, i)
			}
		}
	}
	return info, nil
}

// validate is m's validator for msg: the stateless checks, then the
// sender's standing and sequence (see p2p's validateHeartbeat and
// validateHeads). All machines are approved here.
func (w *world) validate(m *machine, msg *message) bool {
	if err := w.stateless(msg); err != nil {
		w.rejected++
		return false
	}
	switch msg.topic {
	case tHeartbeat:
		info := msg.hb
		if int(info.from) == m.idx {
			return false
		}
		if info.hb.Seq <= m.hbSeq[info.from] {
			w.reordered++
			return false
		}
		m.hbSeq[info.from] = info.hb.Seq
	case tLedger:
		info := msg.heads
		if int(info.from) == m.idx {
			return false
		}
		if info.seq <= m.headsSeq[info.from] {
			w.stale++
			return false
		}
		m.headsSeq[info.from] = info.seq
	}
	return true
}

// onHeartbeat is m's node taking an accepted heartbeat: liveness, leases,
// and the heads it names.
func (w *world) onHeartbeat(m *machine, msg *message) {
	info := msg.hb
	if info == nil || int(info.from) == m.idx {
		return
	}
	from := info.from
	if prev := m.lastHB[from]; prev >= 0 {
		for _, l := range w.msgs[prev].hb.held {
			if m.remote[l.Item]--; m.remote[l.Item] <= 0 {
				delete(m.remote, l.Item)
			}
		}
	}
	for _, l := range info.held {
		m.remote[l.Item]++
	}
	m.lastHB[from], m.lastHBAt[from] = msg.idx, w.now
	m.leases.Observe(info.hb.Machine, info.held, info.hb.Heads)
	m.releasedOK = false // node/sched's remote view is rebuilt after every heartbeat
	if slices.Equal(m.hbHeads[from], info.heads) {
		return
	}
	var missing []int32
	for _, h := range info.heads {
		if h >= 0 && !m.have.has(int(h)) {
			missing = append(missing, h)
		}
	}
	if len(missing) == 0 {
		m.hbHeads[from] = info.heads
		return
	}
	// The author's announcement is usually on its way: fetch what is still
	// missing a moment later (replica.WantHeads).
	w.at(headsGrace, func() { w.fetch(m, w.ms[from], missing) })
}

const (
	headsGrace = 300 * time.Millisecond
	wantRetry  = 2 * time.Second
)

// onHeads is m's replica taking an accepted heads announcement: it folds
// the pushed entries and fetches the heads still missing from the sender.
func (w *world) onHeads(m *machine, msg *message) {
	info := msg.heads
	if info == nil || int(info.from) == m.idx {
		return
	}
	for _, i := range info.pushed {
		w.take(m, i)
	}
	var missing []int32
	for _, h := range info.heads {
		if h >= 0 && !m.have.has(int(h)) {
			missing = append(missing, h)
		}
	}
	for _, i := range m.waiting {
		for _, p := range w.ents[i].parents {
			if !m.have.has(int(p)) && !slices.Contains(missing, p) {
				missing = append(missing, p)
			}
		}
	}
	if len(missing) > 0 {
		w.fetch(m, w.ms[info.from], missing)
	}
}

// fetch asks p for want and the ancestors m lacks (the sync protocol): a
// request, then one answer with the entries in order, which m verifies
// and folds.
func (w *world) fetch(m, p *machine, want []int32) {
	var ask []int32
	for _, i := range want {
		if m.have.has(int(i)) {
			continue
		}
		if at, ok := m.wanted[i]; ok && w.now-at < wantRetry {
			continue
		}
		m.wanted[i] = w.now
		ask = append(ask, i)
	}
	if len(ask) == 0 {
		return
	}
	w.fetches++
	w.transmit(m, p, cSync, 64+40*len(ask), func() {
		// p answers with what it has of ask and its ancestors that m lacks.
		seen := map[int32]bool{}
		var out []int32
		stack := slices.Clone(ask)
		for len(stack) > 0 {
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[i] || m.have.has(int(i)) || !p.have.has(int(i)) {
				continue
			}
			seen[i] = true
			out = append(out, i)
			stack = append(stack, w.ents[i].parents...)
		}
		slices.Sort(out) // ancestors first: an entry's index is above its parents'
		size := 64
		raws := make([][]byte, len(out))
		for k, i := range out {
			raws[k] = w.ents[i].e.Bytes()
			size += len(raws[k]) + 48
		}
		w.transmit(p, m, cSync, size, func() {
			if w.cfg.VerifyAll {
				es, errs := ledger.DecodeBatch(raws)
				for k, e := range es {
					if e == nil {
						panic(fmt.Sprintf("sim: a fetched entry does not verify: %v", errs[k]))
					}
				}
			}
			for _, i := range out {
				w.take(m, i)
			}
		})
	})
}

// write signs an entry by m on its heads, folds it, and announces it with
// the entry pushed (replica.Write, announce).
func (w *world) write(m *machine, kind string, payload any) (int32, error) {
	parents := make([]int32, len(m.heads))
	copy(parents, m.heads)
	e, err := m.signer.Sign(w.org, kind, payload, m.headCIDs(w), m.clock, w.wall().UnixMilli())
	if err != nil {
		return -1, err
	}
	i := w.addEntry(e, parents)
	w.fold(m, i)
	w.announce(m, e)
	return i, nil
}

// announce publishes m's heads on the ledger topic, with e pushed.
func (w *world) announce(m *machine, e *ledger.Entry) {
	payload, err := replica.HeadsPayload(m.headCIDs(w), m.clock, e)
	if err != nil {
		panic(err)
	}
	m.ownHeadSeq = max(m.ownHeadSeq+1, uint64(w.wall().UnixNano()))
	data, err := p2p.EncodeHeads(w.org, m.key, m.ownHeadSeq, payload)
	if err != nil {
		panic(err)
	}
	w.publish(m, w.newMessage(m, tLedger, data), cLedger)
}

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
