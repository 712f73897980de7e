package ledger

import (
	"maps"
	"slices"
)

// Snapshots: readers never hold the fold's lock (docs/design.md §7.1).
//
// A State is copy-on-write at the granularity of its objects (a Member, a
// Machine, a Job). Freeze publishes the State as it is: the snapshot gets
// its own copy of the top-level maps and shares every object with the
// State, whose generation then moves on. An object records the generation
// it was made or copied in; the fold changes an object in place only when
// that is the State's current generation, and otherwise first puts a
// private copy in the State's map (mutJob, mutMachine, mutMember). So
// nothing a snapshot reaches is ever written again, and readers of a
// snapshot need no lock. The other objects are never changed in place:
// a Contract is replaced on every move (stepContract, endContracts), a
// Revocation, a Dataset and the CapUses counts are replaced or deleted,
// and Settings is a value.
//
// Within a copied Job, Items and Machines are copied (the fold writes them
// in place) and Runs is shared: a RunList never changes a run once added,
// and clone leaves the copy's last chunk without spare capacity, so its
// next Add starts a chunk of its own.

// share is a State that shares every object with s, with its own
// top-level maps.
func (s *State) share() *State {
	c := *s
	c.Members = maps.Clone(s.Members)
	c.Machines = maps.Clone(s.Machines)
	c.CapUses = maps.Clone(s.CapUses)
	c.Jobs = maps.Clone(s.Jobs)
	c.Revoked = maps.Clone(s.Revoked)
	c.Contracts = maps.Clone(s.Contracts)
	c.Datasets = maps.Clone(s.Datasets)
	return &c
}

// Freeze returns an immutable snapshot of s as it is now, for readers:
// nothing changes it afterwards, so it may be read from any goroutine
// without a lock, and must not be modified. s folds on; what it changes
// from now on it copies first. Freeze costs a copy of the top-level maps
// (one pointer per member, machine, job, contract...), not of the
// objects. Freezing a snapshot returns it.
func (s *State) Freeze() *State {
	if s.frozen {
		return s
	}
	c := s.share()
	c.frozen = true
	s.gen++
	return c
}

// Fork returns a State to fold on from s (a DryRun) that changes neither
// s nor anything a snapshot shares with it: like Freeze, it copies only
// the top-level maps. s may be a snapshot; Fork does not write it then.
func (s *State) Fork() *State {
	g := s.gen + 1
	if !s.frozen {
		s.gen = g
	}
	c := s.share()
	c.gen, c.frozen = g, false
	return c
}

// Frozen reports whether s is a snapshot (see Freeze).
func (s *State) Frozen() bool { return s.frozen }

// mutJob is job id, or nil, made safe to change in place: a private copy
// when a snapshot may share it.
func (s *State) mutJob(id string) *Job {
	j := s.Jobs[id]
	if j == nil || j.gen == s.gen {
		return j
	}
	c := *j
	c.gen = s.gen
	c.Items = slices.Clone(j.Items)
	c.Machines = maps.Clone(j.Machines)
	c.Runs = j.Runs.clone()
	s.Jobs[id] = &c
	return &c
}

// mutMachine is machine id, or nil, made safe to change in place.
func (s *State) mutMachine(id string) *Machine {
	m := s.Machines[id]
	if m == nil || m.gen == s.gen {
		return m
	}
	c := *m
	c.gen = s.gen
	c.History = slices.Clip(m.History) // an append copies it
	s.Machines[id] = &c
	return &c
}

// mutMember is member id, or nil, made safe to change in place.
func (s *State) mutMember(id string) *Member {
	m := s.Members[id]
	if m == nil || m.gen == s.gen {
		return m
	}
	c := *m
	c.gen = s.gen
	s.Members[id] = &c
	return &c
}
