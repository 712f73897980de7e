package ledger

import (
	"fmt"

	"github.com/cshare/cshare/internal/edkey"
	"github.com/cshare/cshare/internal/text"
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

// ValidateSettings checks SmartShare values; errors name the setting.
func ValidateSettings(s SmartShare) error {
	switch s.Mode {
	case "jobs", "none":
	default:
		return fmt.Errorf("smartshare.mode: %q unknown; allowed: jobs, none", s.Mode)
	}
	switch s.PreemptPolicy {
	case "aggressive", "passive", "disabled":
	default:
		return fmt.Errorf("smartshare.preempt_policy: %q unknown; allowed: aggressive, passive, disabled", s.PreemptPolicy)
	}
	if s.MaxCPUsLimit < 0 || s.MaxCPUsLimit > 1<<20 {
		return fmt.Errorf("smartshare.max_cpus_limit: %d out of range; allowed: 0..%d", s.MaxCPUsLimit, 1<<20)
	}
	if s.DefaultMaxCPUs < -1 || s.DefaultMaxCPUs > 1<<20 {
		return fmt.Errorf("smartshare.default_max_cpus: %d out of range; allowed: -1 (\"*\") .. %d", s.DefaultMaxCPUs, 1<<20)
	}
	return nil
}

// checkDeleteAfter checks market.delete_after, in ms.
func checkDeleteAfter(ms int64) error {
	if ms < 0 || ms > market.MaxDuration {
		return fmt.Errorf("%w: market.delete_after: %d ms; allowed 0 (48h) .. 10 years", ErrMalformed, ms)
	}
	return nil
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
		return applyGenesis(st, e)
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
	switch e.Kind {
	case KindMachineReg:
		var p MachineRegister
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		return applyRegister(st, e, author, p)
	case KindMachineUpdate:
		var p MachineUpdate
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		m := st.Machines[author]
		if m == nil || m.Status == MachineRemoved || m.Status == MachineRejected {
			return denied("machine.update by %s, which is not a registered machine", author)
		}
		if err := checkMachineName(p.Name); err != nil {
			return err
		}
		if err := ValidateMachineFigures(p.Hardware, p.Limits); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if p.Name != "" {
			m.Name = p.Name
		}
		m.Hardware, m.Limits, m.HasLimits, m.Version = p.Hardware, p.Limits, true, p.Version
		return nil
	case KindMerge:
		var p Merge
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		if m := st.Machines[author]; m == nil || m.Status != MachineApproved {
			return denied("ledger.merge by %s, which is not an approved machine", author)
		}
		return nil
	}

	// Everything else is done by a person, through one of their approved
	// machines, with the person's role.
	person, err := actingPerson(st, author)
	if err != nil {
		return err
	}
	switch e.Kind {
	case KindOrgUpdate:
		var p OrgUpdate
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		if err := needAdmin(st, person, "change org settings"); err != nil {
			return err
		}
		set := st.Settings
		if p.RequireMachineApproval != nil {
			set.RequireMachineApproval = *p.RequireMachineApproval
		}
		if p.SmartShareMode != nil {
			set.SmartShare.Mode = *p.SmartShareMode
		}
		if p.PreemptPolicy != nil {
			set.SmartShare.PreemptPolicy = *p.PreemptPolicy
		}
		if p.DefaultMaxCPUs != nil {
			set.SmartShare.DefaultMaxCPUs = *p.DefaultMaxCPUs
		}
		if p.MaxCPUsLimit != nil {
			set.SmartShare.MaxCPUsLimit = *p.MaxCPUsLimit
		}
		if p.MarketDeleteAfter != nil {
			if err := checkDeleteAfter(*p.MarketDeleteAfter); err != nil {
				return err
			}
			set.Market.DeleteAfter = *p.MarketDeleteAfter
		}
		if err := ValidateSettings(set.SmartShare); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if p.Name != nil {
			if err := text.CheckName("name", *p.Name); err != nil {
				return fmt.Errorf("%w: %v", ErrMalformed, err)
			}
		}
		if p.Description != nil {
			if err := text.CheckDescription("description", *p.Description); err != nil {
				return fmt.Errorf("%w: %v", ErrMalformed, err)
			}
		}
		if p.Name != nil {
			st.Name = *p.Name
		}
		if p.Description != nil {
			st.Description = *p.Description
		}
		st.Settings = set
		return nil
	case KindOrgKey:
		var p OrgKey
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		if err := needAdmin(st, person, "rotate the org key"); err != nil {
			return err
		}
		if p.KeyID == "" {
			return fmt.Errorf("%w: empty key id", ErrMalformed)
		}
		st.OrgKeyID = p.KeyID
		return nil
	case KindMachineApprove, KindMachineReject:
		var p MachineRef
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		if err := needAdmin(st, person, "approve or reject machines"); err != nil {
			return err
		}
		m := st.Machines[p.Machine]
		if m == nil {
			return fmt.Errorf("%w: unknown machine %s", ErrMalformed, p.Machine)
		}
		if m.Status != MachinePending {
			return fmt.Errorf("%w: machine %s is %s, not pending", ErrMalformed, p.Machine, m.Status)
		}
		if e.Kind == KindMachineReject {
			setStatus(m, MachineRejected, e, person)
			return nil
		}
		approve(st, m, e, person)
		return nil
	case KindMachineRemove:
		var p MachineRef
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		m := st.Machines[p.Machine]
		if m == nil {
			return fmt.Errorf("%w: unknown machine %s", ErrMalformed, p.Machine)
		}
		if !st.IsAdmin(person) && author != m.ID && person != m.Owner {
			return denied("only an admin, the machine itself or its person may remove machine %s", m.ID)
		}
		if m.Status == MachineRemoved {
			return fmt.Errorf("%w: machine %s already removed", ErrMalformed, m.ID)
		}
		setStatus(m, MachineRemoved, e, person)
		endContracts(st, e, "its host machine was removed from the org", func(c *Contract) bool { return c.Offer.Machine == m.ID })
		return nil
	case KindMemberRole:
		var p MemberRole
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		return applyRole(st, e, person, p)
	case KindMemberRemove:
		var p MemberRef
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		return applyMemberRemove(st, e, person, p)
	case KindOrgTransfer:
		var p OrgTransfer
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		return applyTransfer(st, e, person, p)
	case KindOrgDelete:
		var p OrgDelete
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		if st.Role(person) != RoleOwner {
			return denied("only the owner may delete the org")
		}
		if p.Name != st.Name {
			return fmt.Errorf("%w: org.delete names %q, not the org's name %q", ErrMalformed, p.Name, st.Name)
		}
		st.Deleted, st.DeletedAt = true, e.Time
		endContracts(st, e, "the org was deleted", func(*Contract) bool { return true })
		return nil
	case KindJobSubmit:
		var p JobSpec
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		if err := ValidateJobSpec(p); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if err := checkJobDatasets(st, person, p.Datasets); err != nil {
			return err
		}
		id := JobIDFor(e)
		if st.Jobs[id] != nil {
			return fmt.Errorf("%w: job %s exists", ErrMalformed, id)
		}
		n := p.RangeEnd - p.RangeStart + 1
		st.JobSeq++
		var mc *int64
		if p.MaxCPUs != nil {
			v := *p.MaxCPUs
			mc = &v
		}
		st.Jobs[id] = &Job{ID: id, Submitter: person, Machine: author, Spec: p, Seq: st.JobSeq, Submitted: e.Time, State: JobActive,
			Priority: p.Priority, MaxCPUs: mc, Items: make([]Item, n), Machines: map[string]bool{}}
		return nil
	case KindJobModify:
		var p JobModify
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		j, err := ownJob(st, person, p.Job, "modify")
		if err != nil {
			return err
		}
		if err := ValidateJobModify(p); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if p.Priority != nil {
			j.Priority = *p.Priority
		}
		if p.MaxCPUs != nil {
			v := *p.MaxCPUs
			j.MaxCPUs = &v
		}
		return nil
	case KindJobCancel:
		var p JobRef
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		j, err := ownJob(st, person, p.Job, "cancel")
		if err != nil {
			return err
		}
		if j.State != JobActive {
			return fmt.Errorf("%w: job %s is already %s", ErrMalformed, j.ID, j.State)
		}
		j.State, j.Ended = JobCancelled, e.Time
		return nil
	case KindJobResults:
		var p JobResults
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		return applyResults(st, e, author, p)
	case KindContractRequest, KindContractAccept, KindContractReject, KindContractStop, KindContractStart, KindContractExtend, KindContractRm:
		return applyContract(st, e, author, person)
	case KindDatasetAdd:
		var p DatasetAdd
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		return applyDatasetAdd(st, e, author, person, p)
	case KindDatasetRm:
		var p DatasetRef
		if err := DecodePayload(e.Payload, &p); err != nil {
			return err
		}
		return applyDatasetRm(st, person, p)
	}
	return fmt.Errorf("%w: unknown kind %q", ErrMalformed, e.Kind)
}

func peerIDOf(pub []byte) (string, error) {
	ak, err := edkey.Of(pub)
	if err != nil {
		return "", err
	}
	return ak.S, nil
}
