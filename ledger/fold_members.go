package ledger

import (
	"fmt"

	"github.com/cshare/cshare/internal/text"
)

// Membership in the fold: founding an org, registering, approving and
// removing machines, roles, removals and transfers, all for persons.

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
	if err := checkDeleteAfter(p.Settings.Market.DeleteAfter); err != nil {
		return err
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
		Role: RoleOwner, Registered: e.Time, History: []MachineEvent{{Status: MachineApproved, Time: e.Time, By: owner, Entry: e.cid.String()}}}
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
	m.History = append(m.History, MachineEvent{Status: status, Time: e.Time, By: by, Entry: e.cid.String()})
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
	// Expiry is on the witness's clock, never the joiner's (docs/design.md
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
	// Their rentals end with them, as their jobs do, whether they rent
	// (billing stops now) or host (their machines are gone).
	endContracts(st, e, "its renter is no longer a member", func(c *Contract) bool { return c.Renter == m.ID })
	endContracts(st, e, "its host is no longer a member", func(c *Contract) bool { return c.Host == m.ID })
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
