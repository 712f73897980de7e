package sim

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/p2p"
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
