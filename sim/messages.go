package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/dispatch"
	"github.com/cshare/cshare/p2p"
)

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
