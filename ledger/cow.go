package ledger

import "slices"

// Copy-on-write: how a State is published as an immutable snapshot
// (docs/design.md, "Snapshots") while the fold goes on.
//
// Freeze marks a State published: from then on nothing changes it, nor
// any map, object or list it reaches. Thaw returns the State the fold goes
// on with: a shallow copy that shares every map and object with the frozen
// one. The fold then copies, before its first write since the thaw:
//
//   - a map (Members, Machines, Jobs, ...): a shallow copy (mapW);
//   - an object it changes in place (a Member, a Machine, a Job): a copy
//     of the object (editMember, editMachine, editJob), put in the copied
//     map; a Job's items are copied by chunks of itemChunk, only the
//     chunks written (ItemList);
//   - append-only lists (a machine's History, a job's Runs, the
//     DatasetsRemoved) are clipped at the thaw or the copy, so that an
//     append never writes where the frozen State can read.
//
// Objects the fold replaces rather than changes (a Contract, a Dataset, a
// Revocation, a person's SSH keys) need only their map copied. A State
// never frozen (cow nil) is changed in place, as before: a Log nobody
// reads snapshots of (a benchmark, a test, a checkpoint's re-fold) pays
// nothing.

// cow records what a thawed State owns: the maps it has copied and the
// objects it made or copied since its thaw. nil: it owns everything.
type cow struct {
	maps     uint16
	members  map[*Member]bool
	machines map[*Machine]bool
	jobs     map[*Job]bool
}

// The maps of a State, as bits of cow.maps.
const (
	mapMembers uint16 = 1 << iota
	mapMachines
	mapCapUses
	mapJobs
	mapRevoked
	mapContracts
	mapDatasets
	mapSSHKeys
	mapBudgets
)

// Freeze marks s published: it must not change from now on. The fold
// goes on with s.Thaw(). Call it before s is shared: it writes s.
func (s *State) Freeze() {
	if !s.frozen {
		s.frozen, s.cow = true, nil // what it copied is its own now
		s.fh = &frozenHash{}
	}
}

// Frozen reports whether s was published (Freeze).
func (s *State) Frozen() bool { return s.frozen }

// Thaw returns a State equal to s that the fold may change without
// changing s: s itself when s is not frozen, else a copy that shares
// everything with s until it writes it (see above).
func (s *State) Thaw() *State {
	if !s.frozen {
		return s
	}
	c := *s
	c.frozen, c.fh = false, nil
	c.cow = &cow{}
	c.DatasetsRemoved = slices.Clip(s.DatasetsRemoved)
	return &c
}

// ownMap reports whether s may write map bit in place, and notes that
// it will from now on (the caller copies it when it may not).
func (s *State) ownMap(bit uint16) bool {
	if s.cow == nil || s.cow.maps&bit != 0 {
		return true
	}
	s.cow.maps |= bit
	return false
}

// mapW returns m, copied first when s does not own it yet (bit).
func mapW[K comparable, V any](s *State, bit uint16, m map[K]V) map[K]V {
	if s.ownMap(bit) || m == nil {
		return m
	}
	out := make(map[K]V, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// The maps of s, for writing.
func (s *State) membersW() map[string]*Member {
	s.Members = mapW(s, mapMembers, s.Members)
	return s.Members
}

func (s *State) machinesW() map[string]*Machine {
	s.Machines = mapW(s, mapMachines, s.Machines)
	return s.Machines
}

func (s *State) capUsesW() map[string]int64 {
	s.CapUses = mapW(s, mapCapUses, s.CapUses)
	return s.CapUses
}

func (s *State) jobsW() map[string]*Job {
	s.Jobs = mapW(s, mapJobs, s.Jobs)
	return s.Jobs
}

func (s *State) revokedW() map[string]*Revocation {
	s.Revoked = mapW(s, mapRevoked, s.Revoked)
	return s.Revoked
}

func (s *State) contractsW() map[string]*Contract {
	if s.Contracts == nil { // a state decoded from before contracts existed
		s.Contracts = map[string]*Contract{}
		s.ownMap(mapContracts)
	}
	s.Contracts = mapW(s, mapContracts, s.Contracts)
	return s.Contracts
}

func (s *State) datasetsW() map[string]*Dataset {
	if s.Datasets == nil {
		s.Datasets = map[string]*Dataset{}
		s.ownMap(mapDatasets)
	}
	s.Datasets = mapW(s, mapDatasets, s.Datasets)
	return s.Datasets
}

func (s *State) sshKeysW() map[string][]SSHKey {
	if s.SSHKeys == nil {
		s.SSHKeys = map[string][]SSHKey{}
		s.ownMap(mapSSHKeys)
	}
	s.SSHKeys = mapW(s, mapSSHKeys, s.SSHKeys)
	return s.SSHKeys
}

// putMember, putMachine and putJob add an object the fold made; s owns it.
func (s *State) putMember(m *Member) {
	s.membersW()[m.ID] = m
	if s.cow != nil {
		s.cow.members = noteOwned(s.cow.members, m)
	}
}

func (s *State) putMachine(m *Machine) {
	s.machinesW()[m.ID] = m
	if s.cow != nil {
		s.cow.machines = noteOwned(s.cow.machines, m)
	}
}

func (s *State) putJob(j *Job) {
	s.jobsW()[j.ID] = j
	if s.cow != nil {
		s.cow.jobs = noteOwned(s.cow.jobs, j)
	}
}

func noteOwned[T any](set map[*T]bool, p *T) map[*T]bool {
	if set == nil {
		set = map[*T]bool{}
	}
	set[p] = true
	return set
}

// editMember, editMachine and editJob return the object of s that m (or j)
// is, writable: m itself when s owns it, else a copy that replaces it in
// s. Callers write only through the pointer returned.
func (s *State) editMember(m *Member) *Member {
	if s.cow == nil || s.cow.members[m] {
		return m
	}
	c := *m
	s.putMember(&c)
	return &c
}

func (s *State) editMachine(m *Machine) *Machine {
	if s.cow == nil || s.cow.machines[m] {
		return m
	}
	c := *m
	c.History = slices.Clip(m.History)
	s.putMachine(&c)
	return &c
}

func (s *State) editJob(j *Job) *Job {
	if s.cow == nil || s.cow.jobs[j] {
		return j
	}
	c := *j
	c.Items = j.Items.share()
	c.Runs = j.Runs.clone()
	c.Machines = make(map[string]bool, len(j.Machines)+1)
	for m := range j.Machines {
		c.Machines[m] = true
	}
	s.putJob(&c)
	return &c
}
