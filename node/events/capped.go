package events

import "github.com/cshare/cshare/ledger"

// cappedEvents: machine.capped when the ledger's budget of entries without
// effect caps a machine (docs/design.md §5.8), once a window; the
// coordinator sends it, the capped machine left out. A checkpoint's new
// window lets the machine go silently (it writes again).
func (t *Tracker) cappedEvents(st *ledger.State, self string, coord func(string) string) []Event {
	now := cappedSet(st)
	var out []Event
	for _, id := range changedKeys(now, func(id string, _ bool) bool { return !t.capped[id] }) {
		m := st.Machines[id]
		e := Event{Type: MachineCapped, Machine: id, Mine: coord(id) == self,
			Data: map[string]any{"budget": ledger.IneffectiveBudget}}
		if m != nil {
			e.Data["name"], e.Data["owner"], e.Data["owner_name"] = m.Name, m.Owner, m.OwnerName
		}
		out = append(out, e)
	}
	t.capped = now
	return out
}

func cappedSet(st *ledger.State) map[string]bool {
	out := map[string]bool{}
	for _, id := range st.CappedMachines() {
		out[id] = true
	}
	return out
}
