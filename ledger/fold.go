package ledger

import (
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/cshare/cshare/internal/edkey"
	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger/jobspec"
	"github.com/cshare/cshare/market"
)

// RevokedAuthorError says an entry had no effect because its author had lost
// the needed role through Revocation. The log uses it to resolve concurrent
// power changes (DESIGN §10, "Revocation wins").
type RevokedAuthorError struct{ Rev Revocation }

func (e *RevokedAuthorError) Error() string {
	return fmt.Sprintf("%v: author %s was revoked", ErrNotAuthority, e.Rev.Target)
}

func (e *RevokedAuthorError) Unwrap() error { return ErrNotAuthority }

func denied(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotAuthority}, a...)...)
}

// JobIDFor derives a short, stable job ID from the submitting entry.
func JobIDFor(e *Entry) string {
	d := e.cid.Hash()
	if len(d) > 8 {
		d = d[len(d)-6:]
	}
	return hex.EncodeToString(d)
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

// MaxJobItems caps a job's agenda (its range of items).
const MaxJobItems = jobspec.MaxItems

// ValidateJobSpec checks a job spec with the validators the CLI and the API
// use (package jobspec, and package text for the name); errors name the
// field, the value and what is allowed.
func ValidateJobSpec(s JobSpec) error {
	if s.Name != "" {
		if err := text.CheckName("name", s.Name); err != nil {
			return err
		}
	}
	if err := jobspec.CheckCmd(s.Cmd); err != nil {
		return err
	}
	if err := jobspec.CheckDriver(s.Driver); err != nil {
		return err
	}
	if s.Driver == "docker" && s.Image == "" {
		return errors.New("image: required for the docker driver")
	}
	for _, err := range []error{
		jobspec.CheckRange(s.RangeStart, s.RangeEnd),
		jobspec.CheckPriority(s.Priority),
		jobspec.CheckCPUs(s.CPUs),
		jobspec.CheckRetries(s.Retries),
		jobspec.CheckCores(s.Cores),
		jobspec.CheckMemoryMB(s.MemoryMB),
		jobspec.CheckGPUs(s.GPUs),
	} {
		if err != nil {
			return err
		}
	}
	if err := ValidateDatasetMounts(s.Datasets); err != nil {
		return err
	}
	if s.MaxCPUs != nil {
		if err := jobspec.CheckMaxCPUs(*s.MaxCPUs); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(s.Env) {
		if err := jobspec.CheckEnvName(k); err != nil {
			return err
		}
	}
	return nil
}

// ValidateJobModify checks a job.modify's values as ValidateJobSpec does.
func ValidateJobModify(m JobModify) error {
	if m.Priority != nil {
		if err := jobspec.CheckPriority(*m.Priority); err != nil {
			return err
		}
	}
	if m.MaxCPUs != nil {
		return jobspec.CheckMaxCPUs(*m.MaxCPUs)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Apply applies one entry to st, checking the author's authority against st.
// An error means the entry has no effect (st is unchanged); the entry stays in
// the DAG. Apply is pure: it reads no clock and no IO.
func Apply(st *State, e *Entry) error {
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
			if *p.MarketDeleteAfter < 0 || *p.MarketDeleteAfter > market.MaxDuration {
				return fmt.Errorf("%w: market.delete_after: %d ms; allowed 0 (48h) .. 10 years", ErrMalformed, *p.MarketDeleteAfter)
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

// actingPerson is the person an entry's author machine acts for, when that machine
// is approved and its person a member.
func actingPerson(st *State, author string) (string, error) {
	m := st.Machines[author]
	if m == nil {
		return "", denied("%s is not a machine of the org", author)
	}
	person := m.Owner
	if m.Status != MachineApproved || st.Members[person] == nil {
		if r := st.Revoked[person]; r != nil {
			return "", &RevokedAuthorError{Rev: *r}
		}
		if m.Status != MachineApproved {
			return "", denied("machine %s is %s, not approved", author, m.Status)
		}
		return "", denied("%s is not a member", person)
	}
	return person, nil
}

func needAdmin(st *State, person, what string) error {
	if !st.IsAdmin(person) {
		if r := st.Revoked[person]; r != nil && r.TargetRank >= 2 {
			return &RevokedAuthorError{Rev: *r}
		}
		return denied("only the owner and admins may %s", what)
	}
	return nil
}

func peerIDOf(pub []byte) (string, error) {
	ak, err := edkey.Of(pub)
	if err != nil {
		return "", err
	}
	return ak.S, nil
}

func ownJob(st *State, person, id, what string) (*Job, error) {
	j := st.Jobs[id]
	if j == nil {
		return nil, fmt.Errorf("%w: unknown job %s", ErrMalformed, id)
	}
	if j.Submitter != person && !st.IsAdmin(person) {
		return nil, denied("only the submitter or an admin may %s job %s", what, id)
	}
	return j, nil
}

func applyGenesis(st *State, e *Entry) error {
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
	st.Members[owner] = &Member{ID: owner, Name: ownerName, Role: RoleOwner, Grant: e.Key(), Joined: e.Time}
	st.Machines[machine] = &Machine{ID: machine, Name: name, Owner: owner, OwnerName: ownerName, Status: MachineApproved,
		Role: RoleOwner, Registered: e.Time, History: []MachineEvent{{Status: MachineApproved, Time: e.Time, By: owner}}}
	return nil
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[len(id)-12:]
	}
	return id
}

// checkMachineName checks the name a machine gives itself; empty means
// "keep the current one" (or, on registering, the short ID).
func checkMachineName(s string) error {
	if s == "" {
		return nil
	}
	if err := text.CheckName("machine name", s); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// setStatus changes a machine's status and records it in its history.
func setStatus(m *Machine, status string, e *Entry, by string) {
	m.Status = status
	m.History = append(m.History, MachineEvent{Status: status, Time: e.Time, By: by})
}

func applyRegister(st *State, e *Entry, author string, p MachineRegister) error {
	c := p.Cap
	if err := checkMachineName(p.Name); err != nil {
		return err
	}
	if c.Org != st.Org {
		return fmt.Errorf("%w: capability is for org %s", ErrWrongOrg, c.Org)
	}
	if !c.Verify() {
		return fmt.Errorf("%w: capability signature", ErrBadSignature)
	}
	issuer, err := peerIDOf(c.Issuer)
	if err != nil {
		return fmt.Errorf("%w: capability issuer: %v", ErrMalformed, err)
	}
	// The issuer is a machine; its person must be an admin, through an
	// approved machine.
	if im := st.Machines[issuer]; im == nil || im.Status != MachineApproved || !st.IsAdmin(im.Owner) {
		return denied("capability issuer %s is not an approved machine of an admin", issuer)
	}
	if c.ID == "" || len(c.ID) > 64 {
		return fmt.Errorf("%w: capability id %q", ErrMalformed, c.ID)
	}
	var pending bool
	switch c.Kind {
	case CapOrgKey:
		if c.ID != st.OrgKeyID {
			return denied("org key %s was rotated; ask an admin for the current one", c.ID)
		}
		if c.Role != RoleMember {
			return denied("an org key admits members only")
		}
		pending = st.Settings.RequireMachineApproval
	case CapInvite:
		// An invite admits its holder approved, with its role: member or
		// admin, never owner.
		if c.Role != RoleMember && c.Role != RoleAdmin {
			return denied("an invite grants member or admin, not %q", c.Role)
		}
	default:
		return fmt.Errorf("%w: capability kind %q", ErrMalformed, c.Kind)
	}
	// Expiry is measured on the witness's clock, never the joiner's (DESIGN
	// §11): the register entry's own time is the joiner's to choose.
	if NeedsWitness(c) {
		if p.Witness == nil {
			return denied("%s %s redeemed without a witness", c.Kind, c.ID)
		}
		wid, err := p.Witness.Check(c, author)
		if err != nil {
			return err
		}
		if wm := st.Machines[wid]; wm == nil || wm.Status != MachineApproved {
			return denied("witness %s is not an approved machine", wid)
		}
		if c.Expires != 0 && p.Witness.Time > c.Expires {
			return denied("%s %s expired before its witness saw it", c.Kind, c.ID)
		}
	}
	if c.Uses != 0 && st.CapUses[capUseKey(c)] >= c.Uses {
		return denied("%s %s is used up", c.Kind, c.ID)
	}
	person := author
	name := p.Name
	if name == "" {
		name = shortID(author)
	}
	personName := name
	if p.Delegation != nil {
		if person, err = p.Delegation.Check(author, st.Org); err != nil {
			return err
		}
		personName = p.Delegation.Name
	}
	m := st.Machines[author]
	if m != nil && (m.Status == MachineApproved || m.Status == MachinePending) {
		// Already here: a re-register only renames.
		if p.Name != "" {
			m.Name = p.Name
		}
		return nil
	}
	st.CapUses[capUseKey(c)]++
	if m == nil {
		m = &Machine{ID: author}
		st.Machines[author] = m
	}
	m.Name, m.Owner, m.OwnerName, m.Role, m.Registered = name, person, personName, c.Role, e.Time
	setStatus(m, MachinePending, e, person)
	// A person who was removed (or left) comes back only through an admin.
	if r := st.Revoked[person]; r != nil && r.NewRank == 0 && st.Members[person] == nil {
		pending = true
	}
	if !pending {
		approve(st, m, e, person)
	}
	return nil
}

// capUseKey counts uses per capability kind and ID.
func capUseKey(c Capability) string { return c.Kind + "/" + c.ID }

// approve approves a machine and gives its person the role its capability
// carried, unless they already have a higher one.
func approve(st *State, m *Machine, e *Entry, by string) {
	setStatus(m, MachineApproved, e, by)
	role := m.Role
	if role == "" {
		role = RoleMember
	}
	cur := st.Members[m.Owner]
	if cur == nil {
		name := m.OwnerName
		if name == "" {
			name = m.Name
		}
		st.Members[m.Owner] = &Member{ID: m.Owner, Name: name, Role: role, Grant: e.Key(), Joined: e.Time}
		delete(st.Revoked, m.Owner)
		return
	}
	if RoleRank(role) > RoleRank(cur.Role) {
		cur.Role, cur.Grant = role, e.Key()
	}
}

// applyRole: only the owner promotes members to admin and demotes admins.
func applyRole(st *State, e *Entry, person string, p MemberRole) error {
	if p.Role != RoleMember && p.Role != RoleAdmin {
		return fmt.Errorf("%w: role %q; allowed: member, admin", ErrMalformed, p.Role)
	}
	if st.Role(person) != RoleOwner {
		if r := st.Revoked[person]; r != nil && r.TargetRank >= 2 {
			return &RevokedAuthorError{Rev: *r}
		}
		return denied("only the owner may promote or demote admins")
	}
	m := st.Members[p.Member]
	if m == nil {
		return fmt.Errorf("%w: unknown member %s", ErrMalformed, p.Member)
	}
	if m.Role == RoleOwner {
		return denied("the owner's role cannot be changed; the owner hands the org over with org transfer")
	}
	if m.Role == p.Role {
		return nil
	}
	old := RoleRank(m.Role)
	if RoleRank(p.Role) < old {
		a := st.Members[person]
		st.Revoked[m.ID] = &Revocation{Entry: e.Key(), By: person, ByRank: RoleRank(a.Role), ByGrant: a.Grant,
			Target: m.ID, TargetRank: old, TargetGrant: m.Grant, NewRank: RoleRank(p.Role)}
	}
	m.Role, m.Grant = p.Role, e.Key()
	return nil
}

// applyMemberRemove removes a person: nobody removes the owner; only the
// owner removes admins; admins and the owner remove members; anyone but the
// owner may remove themselves (leave).
func applyMemberRemove(st *State, e *Entry, person string, p MemberRef) error {
	m := st.Members[p.Member]
	if m == nil {
		return fmt.Errorf("%w: unknown member %s", ErrMalformed, p.Member)
	}
	if m.Role == RoleOwner {
		return denied("the owner cannot be removed or leave: the owner first hands the org over with org transfer")
	}
	if person != p.Member {
		if m.Role == RoleAdmin && st.Role(person) != RoleOwner {
			if r := st.Revoked[person]; r != nil && r.TargetRank >= 2 {
				return &RevokedAuthorError{Rev: *r}
			}
			return denied("only the owner may remove an admin")
		}
		if err := needAdmin(st, person, "remove members"); err != nil {
			return err
		}
	}
	a := st.Members[person]
	st.Revoked[m.ID] = &Revocation{Entry: e.Key(), By: person, ByRank: RoleRank(a.Role), ByGrant: a.Grant,
		Target: m.ID, TargetRank: RoleRank(m.Role), TargetGrant: m.Grant, NewRank: 0}
	delete(st.Members, m.ID)
	for _, mc := range st.Machines {
		if mc.Owner == m.ID && mc.Status != MachineRemoved {
			setStatus(mc, MachineRemoved, e, person)
		}
	}
	for _, j := range st.Jobs {
		if j.Submitter == m.ID && j.State == JobActive {
			j.State, j.Ended, j.Error = JobCancelled, e.Time, "its submitter is no longer a member"
		}
	}
	return nil
}

// applyTransfer makes an admin the owner; the owner becomes an admin.
func applyTransfer(st *State, e *Entry, person string, p OrgTransfer) error {
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
	old := st.Members[person]
	old.Role, old.Grant = RoleAdmin, e.Key()
	to.Role, to.Grant = RoleOwner, e.Key()
	st.Owner = to.ID
	return nil
}

// addRun records a run of one of j's items. A run neither counted nor
// stopped is a duplicate: work done again.
func addRun(j *Job, machine string, r ItemResult, counted bool) {
	j.Runs.Add(Run{Item: r.Item, Machine: machine, Instance: r.Instance, Started: r.Started,
		DurationMS: r.DurationMS, Code: r.Code, Counted: counted, Stopped: r.Stopped})
	if !counted && !r.Stopped {
		j.Duplicates++
	}
}

func applyResults(st *State, e *Entry, author string, p JobResults) error {
	m := st.Machines[author]
	if m == nil || m.Status != MachineApproved {
		return denied("job results from %s, which is not an approved machine", author)
	}
	j := st.Jobs[p.Job]
	if j == nil {
		return fmt.Errorf("%w: unknown job %s", ErrMalformed, p.Job)
	}
	if len(p.Results) == 0 {
		return fmt.Errorf("%w: no results", ErrMalformed)
	}
	for _, r := range p.Results {
		if r.Item < j.Spec.RangeStart || r.Item > j.Spec.RangeEnd {
			return fmt.Errorf("%w: item %d outside the job's range", ErrMalformed, r.Item)
		}
	}
	if j.State != JobActive {
		// Late results of a finished or cancelled job count for nothing,
		// but they were real runs.
		for _, r := range p.Results {
			j.Items[uint64(r.Item)-uint64(j.Spec.RangeStart)].Attempts++ // a real run all the same
			addRun(j, author, r, false)
		}
		return nil
	}
	if !j.Machines[author] {
		j.Machines[author] = true
		m.TotalJobs++
	}
	for _, r := range p.Results {
		it := &j.Items[uint64(r.Item)-uint64(j.Spec.RangeStart)]
		it.Attempts++ // every real attempt, counted or not
		if r.Stopped || it.Status != ItemPending {
			addRun(j, author, r, false) // the first completion in the total order counts
			continue
		}
		addRun(j, author, r, true)
		it.Code, it.DurationMS, it.OutputSize, it.Machine = r.Code, r.DurationMS, r.OutputSize, author
		if r.Code != 0 {
			it.Failures++
		}
		switch {
		case r.Code == 0:
			it.Status = ItemDone
			j.Done++
		case it.Failures > j.Spec.Retries:
			it.Status = ItemFailed
			j.Failed++
			if j.Error == "" {
				j.Error = fmt.Sprintf("item %d failed with exit code %d", r.Item, r.Code)
				if r.Error != "" {
					j.Error = fmt.Sprintf("item %d failed: %s", r.Item, r.Error)
				}
			}
		}
	}
	if j.Done+j.Failed == int64(len(j.Items)) {
		j.State, j.Ended = JobDone, e.Time
		if j.Failed > 0 {
			j.State = JobFailed
		}
	}
	return nil
}
