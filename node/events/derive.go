package events

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/cshare/cshare/ledger"
)

// EndingNotice is how long before a running contract's end it is said to
// be ending (contract.ending, once for each end it is given).
const EndingNotice = 15 * time.Minute

// Tracker is what Derive remembers of what the node saw last: the ledger's
// machines, members, jobs, contracts and settings, and which approved
// machines were online. The node keeps one and hands it every change; it
// has no goroutine, clock or randomness, and reads no map in its order.
//
// Who notifies (Event.Mine), so that an org sends each event once (each
// node derives the same events from the same ledger):
//   - ledger.entry: the entry's author;
//   - machine.pending: the registering machine;
//   - job.*: the job's submitting machine; item.*: the machine whose run
//     ended the item (the result's author);
//   - contract.*: the contract's host machine;
//   - machine.approved/rejected/removed, machine.online/offline,
//     member.*, settings.changed: the coordinator, the approved machine
//     with the lowest ID that this node sees online (itself included),
//     the machine the event is about left out.
type Tracker struct {
	based     bool
	org       string
	machines  map[string]string // ledger status
	online    map[string]bool   // approved machines other than self: online as last seen
	members   map[string]bool
	jobs      map[string]string // state
	contracts map[string]contractSeen
	settings  string
	capped    map[string]bool // capped.go
}

type contractSeen struct {
	running, ended bool
	warnedEnd      int64 // the End contract.ending was said for
}

// Baseline records st as seen, with no events: what was there before the
// node started, or what a joining node fetched.
func (t *Tracker) Baseline(st *ledger.State) {
	t.based, t.org = true, st.Org
	t.machines, t.members, t.jobs, t.contracts = map[string]string{}, map[string]bool{}, map[string]string{}, map[string]contractSeen{}
	if t.online == nil {
		t.online = map[string]bool{}
	}
	for id, m := range st.Machines {
		t.machines[id] = m.Status
	}
	for id := range st.Members {
		t.members[id] = true
	}
	for id, j := range st.Jobs {
		t.jobs[id] = j.State
	}
	for id, c := range st.Contracts {
		t.contracts[id] = contractSeen{running: c.Running, ended: c.Removed || c.Rejected}
	}
	t.settings = settingsKey(st)
	t.capped = cappedSet(st)
}

// Ledger derives the events of es, entries just added to the ledger, from
// st, the state after them; self is this machine's ID. A tracker without
// a baseline, or one of another org (a node that just joined), takes st
// as its baseline and derives only the ledger.entry events. The entries'
// and items' events are described, and built when published (Batch).
func (t *Tracker) Ledger(st *ledger.State, es []*ledger.Entry, self string) *Batch {
	b := &Batch{self: self, entries: es}
	if !t.based || t.org != st.Org {
		t.Baseline(st)
		return b
	}
	coord := t.coordinator(st, self)
	b.mid = t.machineEvents(st, self, coord)
	b.mid = append(b.mid, t.memberEvents(st, self, coord)...)
	b.mid = append(b.mid, t.cappedEvents(st, self, coord)...)
	if k := settingsKey(st); k != t.settings {
		t.settings = k
		b.mid = append(b.mid, Event{Type: SettingsChanged, Data: map[string]any{"name": st.Name}, Mine: coord("") == self})
	}
	b.items = itemHits(st, es)
	b.tail = t.jobEvents(st, self)
	b.tail = append(b.tail, t.contractEvents(st, self)...)
	return b
}

// coordinator returns who notifies of an event about machine subject: the
// lowest-ID approved machine online as this node sees it, subject left
// out.
func (t *Tracker) coordinator(st *ledger.State, self string) func(subject string) string {
	var ids []string
	for id, m := range st.Machines {
		if m.Status == ledger.MachineApproved && (id == self || t.online[id]) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return func(subject string) string {
		for _, id := range ids {
			if id != subject {
				return id
			}
		}
		return ""
	}
}

func (t *Tracker) machineEvents(st *ledger.State, self string, coord func(string) string) []Event {
	var out []Event
	for _, id := range changedKeys(st.Machines, func(id string, m *ledger.Machine) bool { return t.machines[id] != m.Status }) {
		m := st.Machines[id]
		t.machines[id] = m.Status
		e := Event{Machine: id, Data: map[string]any{"name": m.Name, "owner": m.Owner, "owner_name": m.OwnerName}}
		switch m.Status {
		case ledger.MachinePending:
			e.Type, e.Mine = MachinePending, id == self
		case ledger.MachineApproved:
			e.Type, e.Mine = MachineApproved, coord(id) == self
		case ledger.MachineRejected:
			e.Type, e.Mine = MachineRejected, coord(id) == self
		case ledger.MachineRemoved:
			e.Type, e.Mine = MachineRemoved, coord(id) == self
			delete(t.online, id)
		default:
			continue
		}
		out = append(out, e)
	}
	return out
}

func (t *Tracker) memberEvents(st *ledger.State, self string, coord func(string) string) []Event {
	var out []Event
	for _, id := range changedKeys(st.Members, func(id string, _ *ledger.Member) bool { return !t.members[id] }) {
		t.members[id] = true
		m := st.Members[id]
		out = append(out, Event{Type: MemberJoined, Data: map[string]any{"person": id, "name": m.Name, "role": m.Role}, Mine: coord("") == self})
	}
	for _, id := range changedKeys(t.members, func(id string, _ bool) bool { return st.Members[id] == nil }) {
		delete(t.members, id)
		out = append(out, Event{Type: MemberRemoved, Data: map[string]any{"person": id}, Mine: coord("") == self})
	}
	return out
}

// itemHits are the items the results among es ended, each once: by the
// run the state counted (its machine, code and duration), not by a
// duplicate run of the same item. It decodes each job.results payload
// again, into one resultsView whose buffers it reuses (results.go).
func itemHits(st *ledger.State, es []*ledger.Entry) []itemHit {
	var out []itemHit
	var p resultsView
	for k, e := range es {
		if e.Kind != ledger.KindJobResults {
			continue
		}
		if p.decode(e.Payload) != nil {
			continue
		}
		j := st.Jobs[string(p.Job)]
		if j == nil || j.Archived != nil { // a finished job's results are no item's end
			continue
		}
		for i, r := range p.Results {
			if r.Stopped || r.Item < j.Spec.RangeStart || r.Item > j.Spec.RangeEnd {
				continue
			}
			it := j.Items.At(int(uint64(r.Item) - uint64(j.Spec.RangeStart)))
			if it.Machine != e.AuthorString() || it.Code != r.Code || it.DurationMS != r.DurationMS {
				continue
			}
			switch it.Status {
			case ledger.ItemDone, ledger.ItemFailed:
				if out == nil { // room for one an entry left, as most are
					out = make([]itemHit, 0, len(es)-k)
				}
				out = append(out, itemHit{entry: uint32(k), result: uint32(i), failed: it.Status == ledger.ItemFailed})
			} // else failed, to be retried
		}
	}
	return out
}

func (t *Tracker) jobEvents(st *ledger.State, self string) []Event {
	var out []Event
	for _, id := range changedKeys(st.Jobs, func(id string, j *ledger.Job) bool { old, seen := t.jobs[id]; return !seen || old != j.State }) {
		j := st.Jobs[id]
		_, seen := t.jobs[id]
		t.jobs[id] = j.State
		data := func() map[string]any {
			d := map[string]any{"name": j.Spec.Name, "submitter": j.Submitter, "done": j.Done, "failed": j.Failed, "total": j.Total()}
			if j.Error != "" {
				d["error"] = j.Error
			}
			return d
		}
		if !seen {
			out = append(out, Event{Type: JobSubmitted, Job: id, Machine: j.Machine, Data: data(), Mine: j.Machine == self})
		}
		typ := map[string]string{ledger.JobDone: JobDone, ledger.JobFailed: JobFailed, ledger.JobCancelled: JobCancelled}[j.State]
		if typ != "" {
			out = append(out, Event{Type: typ, Job: id, Machine: j.Machine, Data: data(), Mine: j.Machine == self})
		}
	}
	return out
}

func (t *Tracker) contractEvents(st *ledger.State, self string) []Event {
	var out []Event
	seenNow := func(c *ledger.Contract, old contractSeen) contractSeen {
		return contractSeen{running: c.Running, ended: c.Removed || c.Rejected, warnedEnd: old.warnedEnd}
	}
	for _, id := range changedKeys(st.Contracts, func(id string, c *ledger.Contract) bool {
		old, seen := t.contracts[id]
		return !seen || seenNow(c, old) != old
	}) {
		c := st.Contracts[id]
		old, seen := t.contracts[id]
		now := seenNow(c, old)
		t.contracts[id] = now
		ev := func(typ string) Event {
			return Event{Type: typ, Contract: id, Machine: c.Machine, Mine: c.Machine == self,
				Data: map[string]any{"renter": c.Renter, "host": c.Host, "end": c.End}}
		}
		if !seen {
			out = append(out, ev(ContractCreated))
		}
		switch {
		case now.running && !old.running:
			out = append(out, ev(ContractStarted))
		case (!now.running && old.running) || (now.ended && !old.ended && seen):
			out = append(out, ev(ContractStopped))
		}
	}
	return out
}

// Peers derives machine.online and machine.offline from online (whether
// each approved machine other than self is online now), and
// contract.ending from now. While quiet (the node has just started and
// has not yet heard from its peers), it records what it sees without
// events.
func (t *Tracker) Peers(st *ledger.State, online func(id string) bool, self string, now time.Time, quiet bool) []Event {
	if !t.based || t.org != st.Org {
		t.Baseline(st)
	}
	var out []Event
	type change struct {
		id string
		on bool
	}
	var changes []change
	for _, id := range sortedKeys(st.Machines) {
		m := st.Machines[id]
		if id == self || m.Status != ledger.MachineApproved {
			delete(t.online, id)
			continue
		}
		on := online(id)
		was, seen := t.online[id]
		t.online[id] = on
		if !quiet && (was != on) && (seen || on) {
			changes = append(changes, change{id, on})
		}
	}
	coord := t.coordinator(st, self) // as it is now: a machine gone offline sends nothing
	for _, c := range changes {
		m := st.Machines[c.id]
		e := Event{Type: MachineOffline, Machine: c.id, Time: now, Data: map[string]any{"name": m.Name, "owner": m.Owner}, Mine: coord(c.id) == self}
		if c.on {
			e.Type = MachineOnline
		}
		out = append(out, e)
	}
	for _, id := range sortedKeys(st.Contracts) {
		c := st.Contracts[id]
		seen := t.contracts[id]
		end := time.UnixMilli(c.End)
		if !c.Running || c.Removed || c.End == 0 || seen.warnedEnd == c.End || now.Before(end.Add(-EndingNotice)) || !now.Before(end) {
			continue
		}
		seen.warnedEnd = c.End
		t.contracts[id] = seen
		out = append(out, Event{Type: ContractEnding, Contract: id, Machine: c.Machine, Time: now, Mine: c.Machine == self,
			Data: map[string]any{"renter": c.Renter, "host": c.Host, "end": c.End, "left": fmt.Sprint(end.Sub(now).Round(time.Second))}})
	}
	return out
}

// settingsKey is what settings.changed compares: the org's name,
// description and settings.
func settingsKey(st *ledger.State) string {
	return fmt.Sprintf("%q %q %+v", st.Name, st.Description, st.Settings)
}

// changedKeys is the keys of m for which changed holds, sorted: what a
// batch changed, without sorting every key of a large map each batch.
func changedKeys[V any](m map[string]V, changed func(k string, v V) bool) []string {
	var out []string
	for k, v := range m {
		if changed(k, v) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
