package ledger

import (
	"fmt"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/market"
)

// The org in the fold: founding it, its settings and key, handing it over
// and deleting it.

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

// foldGenesis founds the org: its author machine's person (or the machine
// itself) is the owner. Apply folds it before any other check.
func foldGenesis(st *State, e *Entry) error {
	if st.Org != "" {
		return fmt.Errorf("%w: second genesis", ErrMalformed)
	}
	var p Genesis
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	if err := text.CheckName("name", p.Name); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := text.CheckDescription("description", p.Description); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := checkMachineName(p.MachineName); err != nil {
		return err
	}
	if err := ValidateSettings(p.Settings.SmartShare); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := checkDeleteAfter(p.Settings.Market.DeleteAfter); err != nil {
		return err
	}
	if err := ValidatePolicies(p.Settings.Policies); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := CheckLedgerSettings(p.Settings.Ledger); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := CheckJobsSettings(p.Settings.Jobs); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	machine := e.author
	name := p.MachineName
	if name == "" {
		name = shortID(machine)
	}
	owner, ownerName := machine, name
	if p.Owner != nil {
		id, err := p.Owner.Check(machine, GenesisOrg(p.Nonce))
		if err != nil {
			return err
		}
		owner, ownerName = id, p.Owner.Name
	}
	st.Org = e.cid.String()
	st.Name, st.Description, st.Owner, st.Created = p.Name, p.Description, owner, e.Time
	st.Settings, st.OrgKeyID = p.Settings, p.OrgKeyID
	st.putMember(&Member{ID: owner, Name: ownerName, Role: RoleOwner, Grant: e.Key(), Joined: e.Time})
	st.putMachine(&Machine{ID: machine, Name: name, Owner: owner, OwnerName: ownerName, Status: MachineApproved,
		Role: RoleOwner, Registered: e.Time, History: []MachineEvent{{Status: MachineApproved, Time: e.Time, By: owner, Entry: e.cid.String()}}})
	return nil
}

// foldOrgUpdate: admins change the org's settings, name and description.
func foldOrgUpdate(st *State, e *Entry, _, person string) error {
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
	if err := applyPolicies(&set.Policies, p.Policies); err != nil {
		return err
	}
	if err := applyLedger(&set.Ledger, p); err != nil {
		return err
	}
	if p.JobsRetainMS != nil {
		set.Jobs.RetainMS = *p.JobsRetainMS
		if err := CheckJobsSettings(set.Jobs); err != nil {
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
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
	if len(p.Policies) > 0 {
		admitAllQueued(st, e.Time) // a raised or removed limit lets queued jobs run
	}
	return nil
}

// foldOrgKey: admins rotate the org key (the ID org keys must carry).
func foldOrgKey(st *State, e *Entry, _, person string) error {
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
}

// foldOrgTransfer makes an admin the owner; the owner becomes an admin.
func foldOrgTransfer(st *State, e *Entry, _, person string) error {
	var p OrgTransfer
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	if st.Role(person) != RoleOwner {
		return denied("only the owner may transfer the org")
	}
	to := st.Members[p.To]
	if to == nil {
		return fmt.Errorf("%w: unknown member %s", ErrMalformed, p.To)
	}
	if to.ID == person {
		return fmt.Errorf("%w: %s already owns the org", ErrMalformed, person)
	}
	if to.Role != RoleAdmin {
		return denied("the org can be transferred to an admin only; %s is a %s", to.ID, to.Role)
	}
	old, to := st.editMember(st.Members[person]), st.editMember(to)
	old.Role, old.Grant = RoleAdmin, e.Key()
	to.Role, to.Grant = RoleOwner, e.Key()
	st.Owner = to.ID
	return nil
}

// foldOrgDelete: the owner deletes the org, naming it; every contract
// ends, and Apply refuses every later entry.
func foldOrgDelete(st *State, e *Entry, _, person string) error {
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
}
