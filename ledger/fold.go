package ledger

import (
	"fmt"

	"github.com/cshare/cshare/market"
)

// RevokedAuthorError says an entry had no effect because its author had lost
// the needed role through Revocation. The log uses it to resolve concurrent
// power changes (docs/design.md §6, "Revocation wins").
type RevokedAuthorError struct{ Rev Revocation }

func (e *RevokedAuthorError) Error() string {
	return fmt.Sprintf("%v: author %s was revoked", ErrNotAuthority, e.Rev.Target)
}

func (e *RevokedAuthorError) Unwrap() error { return ErrNotAuthority }

func denied(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotAuthority}, a...)...)
}

// foldFunc folds one entry of its kind into st: it decodes the payload,
// checks it and the authority, and changes st only when it returns nil.
// author is the machine that signed e; person is the person it acts for,
// or "" for the kinds a machine writes as itself.
type foldFunc func(st *State, e *Entry, author, person string) error

// kindFold is how Apply folds one kind.
type kindFold struct {
	// byPerson: the kind is done by a person, through one of their
	// approved machines, with the person's role. Apply finds that person
	// (actingPerson) before the fold decodes the payload.
	byPerson bool
	fold     foldFunc
}

// folds is the fold of every kind but org.genesis, which Apply folds
// before the org exists. Apply only looks kinds up in it: nothing ranges
// over it, so map order decides nothing.
var folds = map[string]kindFold{
	// fold_machines.go: a machine as itself.
	KindMachineReg:    {false, foldMachineRegister},
	KindMachineUpdate: {false, foldMachineUpdate},
	KindMerge:         {false, foldMerge},
	// checkpoint.go
	KindCheckpoint: {true, foldCheckpoint},
	// fold_org.go
	KindOrgUpdate:   {true, foldOrgUpdate},
	KindOrgKey:      {true, foldOrgKey},
	KindOrgTransfer: {true, foldOrgTransfer},
	KindOrgDelete:   {true, foldOrgDelete},
	// fold_machines.go: machines managed by persons.
	KindMachineApprove: {true, foldMachineApprove},
	KindMachineReject:  {true, foldMachineReject},
	KindMachineRemove:  {true, foldMachineRemove},
	// fold_members.go
	KindMemberRole:   {true, foldMemberRole},
	KindMemberRemove: {true, foldMemberRemove},
	// fold_jobs.go
	KindJobSubmit:  {true, foldJobSubmit},
	KindJobModify:  {true, foldJobModify},
	KindJobCancel:  {true, foldJobCancel},
	KindJobResults: {true, foldJobResults},
	// fold_policies.go
	KindJobStart:  {true, foldJobStart},
	KindJobExpire: {true, foldJobExpire},
	// fold_market.go
	KindContractRequest: {true, foldContractRequest},
	KindContractAccept:  {true, foldContractAccept},
	KindContractReject:  {true, foldContractReject},
	KindContractStop:    {true, foldContractStop},
	KindContractStart:   {true, foldContractStart},
	KindContractExtend:  {true, foldContractExtend},
	KindContractRm:      {true, foldContractRm},
	KindContractAck:     {true, foldContractAck},
	KindContractWitness: {true, foldContractWitness},
	// fold_datasets.go
	KindDatasetAdd:    {true, foldDatasetAdd},
	KindDatasetRm:     {true, foldDatasetRm},
	KindDatasetAccess: {true, foldDatasetAccess},
	// fold_sshkeys.go
	KindSSHKeyAdd: {true, foldSSHKeyAdd},
	KindSSHKeyRm:  {true, foldSSHKeyRm},
}

// Apply applies one entry to st, checking the author's authority against st.
// An error means the entry has no effect (st is unchanged); the entry stays in
// the DAG. Apply is pure: it reads no clock and no IO.
func Apply(st *State, e *Entry) error {
	if e.Time < 0 || e.Time > market.MaxTime {
		// Every time the fold records may later have a duration added to
		// it (a contract's end, a job's age): bounded here, no sum
		// overflows.
		return fmt.Errorf("%w: time %d ms; allowed: a unix time in ms from 1970 to the year 9999", ErrMalformed, e.Time)
	}
	if e.Kind == KindGenesis {
		return foldGenesis(st, e)
	}
	if st.Org == "" {
		return fmt.Errorf("%w: no genesis yet", ErrMalformed)
	}
	if e.Org != st.Org {
		return ErrWrongOrg
	}
	if st.Deleted {
		return fmt.Errorf("%w: %s after org.delete", ErrDeleted, e.Kind)
	}
	author := e.author
	k, known := folds[e.Kind]
	if known && !k.byPerson {
		return k.fold(st, e, author, "")
	}
	// Everything else is done by a person, through one of their approved
	// machines, with the person's role; an unknown kind too, so that a
	// stranger's entry is refused for its author first.
	person, err := actingPerson(st, author)
	if err != nil {
		return err
	}
	if !known {
		return fmt.Errorf("%w: unknown kind %q", ErrMalformed, e.Kind)
	}
	return k.fold(st, e, author, person)
}
