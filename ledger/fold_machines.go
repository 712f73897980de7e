package ledger

import (
	"fmt"

	"github.com/cshare/cshare/internal/edkey"
	"github.com/cshare/cshare/internal/text"
)

// Machines in the fold: registering with a capability, a machine's own
// updates and merges, and approving, rejecting and removing machines.

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

// foldMachineRegister: a machine joins with a capability (an org key or
// an invite) that an admin's approved machine signed; see the package
// comment for the rules.
func foldMachineRegister(st *State, e *Entry, author, _ string) error {
	var p MachineRegister
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
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
			st.editMachine(m).Name = p.Name
		}
		return nil
	}
	if err := checkMachinesPolicy(st, person); err != nil {
		return err
	}
	st.capUsesW()[capUseKey(c)]++
	if m == nil {
		m = &Machine{ID: author}
		st.putMachine(m)
	} else {
		m = st.editMachine(m)
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
		st.putMember(&Member{ID: m.Owner, Name: name, Role: role, Grant: e.Key(), Joined: e.Time})
		if _, ok := st.Revoked[m.Owner]; ok {
			delete(st.revokedW(), m.Owner)
		}
		return
	}
	if RoleRank(role) > RoleRank(cur.Role) {
		cur = st.editMember(cur)
		cur.Role, cur.Grant = role, e.Key()
	}
}

// foldMachineUpdate: a registered machine updates its own name, hardware,
// limits and version.
func foldMachineUpdate(st *State, e *Entry, author, _ string) error {
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
	m = st.editMachine(m)
	if p.Name != "" {
		m.Name = p.Name
	}
	m.Hardware, m.Limits, m.HasLimits, m.Version = p.Hardware, p.Limits, true, p.Version
	return nil
}

// foldMerge: an approved machine joins the DAG's heads; it changes nothing.
func foldMerge(st *State, e *Entry, author, _ string) error {
	var p Merge
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	if m := st.Machines[author]; m == nil || m.Status != MachineApproved {
		return denied("ledger.merge by %s, which is not an approved machine", author)
	}
	return nil
}

// pendingMachine is the pending machine a machine.approve or
// machine.reject names, when person is an admin.
func pendingMachine(st *State, e *Entry, person string) (*Machine, error) {
	var p MachineRef
	if err := DecodePayload(e.Payload, &p); err != nil {
		return nil, err
	}
	if err := needAdmin(st, person, "approve or reject machines"); err != nil {
		return nil, err
	}
	m := st.Machines[p.Machine]
	if m == nil {
		return nil, fmt.Errorf("%w: unknown machine %s", ErrMalformed, p.Machine)
	}
	if m.Status != MachinePending {
		return nil, fmt.Errorf("%w: machine %s is %s, not pending", ErrMalformed, p.Machine, m.Status)
	}
	return m, nil
}

// foldMachineApprove: an admin approves a pending machine.
func foldMachineApprove(st *State, e *Entry, _, person string) error {
	m, err := pendingMachine(st, e, person)
	if err != nil {
		return err
	}
	approve(st, st.editMachine(m), e, person)
	return nil
}

// foldMachineReject: an admin rejects a pending machine.
func foldMachineReject(st *State, e *Entry, _, person string) error {
	m, err := pendingMachine(st, e, person)
	if err != nil {
		return err
	}
	setStatus(st.editMachine(m), MachineRejected, e, person)
	return nil
}

// foldMachineRemove: an admin, the machine itself or its person removes a
// machine; the contracts it hosts end.
func foldMachineRemove(st *State, e *Entry, author, person string) error {
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
	setStatus(st.editMachine(m), MachineRemoved, e, person)
	endContracts(st, e, "its host machine was removed from the org", func(c *Contract) bool { return c.Offer.Machine == m.ID })
	return nil
}

func peerIDOf(pub []byte) (string, error) {
	ak, err := edkey.Of(pub)
	if err != nil {
		return "", err
	}
	return ak.S, nil
}
