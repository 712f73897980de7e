package ledger

import "fmt"

// Membership in the fold: who a machine acts for, roles and removals.

// foldMemberRole: only the owner promotes members to admin and demotes
// admins.
func foldMemberRole(st *State, e *Entry, _, person string) error {
	var p MemberRole
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
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
		st.revokedW()[m.ID] = &Revocation{Entry: e.Key(), By: person, ByRank: RoleRank(a.Role), ByGrant: a.Grant,
			Target: m.ID, TargetRank: old, TargetGrant: m.Grant, NewRank: RoleRank(p.Role)}
	}
	m = st.editMember(m)
	m.Role, m.Grant = p.Role, e.Key()
	return nil
}

// foldMemberRemove removes a person: nobody removes the owner; only the
// owner removes admins; admins and the owner remove members; anyone but the
// owner may remove themselves (leave).
func foldMemberRemove(st *State, e *Entry, _, person string) error {
	var p MemberRef
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
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
	st.revokedW()[m.ID] = &Revocation{Entry: e.Key(), By: person, ByRank: RoleRank(a.Role), ByGrant: a.Grant,
		Target: m.ID, TargetRank: RoleRank(m.Role), TargetGrant: m.Grant, NewRank: 0}
	delete(st.membersW(), m.ID)
	dropSSHKeys(st, m.ID)
	for _, mc := range st.Machines {
		if mc.Owner == m.ID && mc.Status != MachineRemoved {
			setStatus(st.editMachine(mc), MachineRemoved, e, person)
		}
	}
	for _, j := range st.Jobs {
		if j.Submitter == m.ID && j.State == JobActive {
			j = st.editJob(j)
			j.State, j.Ended, j.Error = JobCancelled, e.Time, "its submitter is no longer a member"
		}
	}
	// Their rentals end with them, as their jobs do, whether they rent
	// (billing stops now) or host (their machines are gone).
	endContracts(st, e, "its renter is no longer a member", func(c *Contract) bool { return c.Renter == m.ID })
	endContracts(st, e, "its host is no longer a member", func(c *Contract) bool { return c.Host == m.ID })
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
