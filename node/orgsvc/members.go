package orgsvc

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/ref"
)

// The machines and members API: each request is checked against the
// rules before the fold checks it again, so a refused one writes nothing.

// Machines implements api.OrgAPI.
func (s *Service) Machines(ctx context.Context) ([]api.MachineInfo, error) {
	if err := s.needOrg(); err != nil {
		return nil, err
	}
	now := s.now()
	var out []api.MachineInfo
	s.snapshot(func(st *ledger.State) {
		out = make([]api.MachineInfo, 0, len(st.Machines))
		for _, m := range st.SortedMachines() {
			out = append(out, s.d.Machines.MachineInfo(st, m, now))
		}
	})
	for i := range out {
		out[i].Status = s.d.Machines.MachineStatus(out[i].ID, now)
	}
	return out, nil
}

// resolveMachine finds a machine by reference (ref.Resolve's rules) and
// returns a copy.
func (s *Service) resolveMachine(r string) (*ledger.Machine, error) {
	var m *ledger.Machine
	var err error
	s.snapshot(func(st *ledger.State) {
		var id string
		if id, err = ref.Resolve("machine", "cshare machine ls", r, machineCandidates(st)); err == nil {
			c := *st.Machines[id]
			m = &c
		}
	})
	return m, err
}

// Machine implements api.OrgAPI.
func (s *Service) Machine(ctx context.Context, id string) (api.MachineInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.MachineInfo{}, err
	}
	m, err := s.resolveMachine(id)
	if err != nil {
		return api.MachineInfo{}, err
	}
	now := s.now()
	var mi api.MachineInfo
	s.snapshot(func(st *ledger.State) {
		mi = s.d.Machines.MachineInfo(st, m, now)
		if cur := st.Machines[m.ID]; cur != nil {
			mi.History = machineHistory(st, cur.History)
		}
	})
	mi.Status = s.d.Machines.MachineStatus(m.ID, now)
	return mi, nil
}

// machineHistory renders a machine's ledger history for machine show.
func machineHistory(st *ledger.State, h []ledger.MachineEvent) []api.MachineEvent {
	out := make([]api.MachineEvent, 0, len(h))
	for _, ev := range h {
		out = append(out, api.MachineEvent{Status: ev.Status, Time: api.FormatTime(time.UnixMilli(ev.Time)), By: ev.By,
			ByName: personName(st, ev.By)})
	}
	return out
}

// MachineAction implements api.OrgAPI.
func (s *Service) MachineAction(ctx context.Context, id, action string) (api.MachineInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.MachineInfo{}, err
	}
	m, err := s.resolveMachine(id)
	if err != nil {
		return api.MachineInfo{}, err
	}
	var admin bool
	var me string
	s.snapshot(func(st *ledger.State) {
		me = s.PersonIn(st)
		admin = st.IsAdmin(me)
	})
	var kind string
	switch action {
	case "approve", "reject":
		if !admin {
			return api.MachineInfo{}, s.Refuse("only the owner and admins may " + action + " machines")
		}
		if m.Status != ledger.MachinePending {
			return api.MachineInfo{}, api.Errorf(http.StatusConflict, "machine %s (%s) is %s, not pending", m.Name, m.ID, m.Status)
		}
		kind = ledger.KindMachineApprove
		if action == "reject" {
			kind = ledger.KindMachineReject
		}
	case "remove":
		if !admin && m.ID != s.idStr && m.Owner != me {
			return api.MachineInfo{}, s.Refuse("only the owner, admins and the person a machine acts for may remove it; machine " + m.ID + " acts for another person")
		}
		if m.Status == ledger.MachineRemoved {
			return api.MachineInfo{}, api.Errorf(http.StatusConflict, "machine %s is already removed", m.ID)
		}
		kind = ledger.KindMachineRemove
	default:
		return api.MachineInfo{}, api.Errorf(http.StatusBadRequest, "unknown machine action %q; allowed: approve, reject, remove", api.Ellipsize(action))
	}
	if kind == ledger.KindMachineRemove && m.ID == s.idStr {
		// Removing this machine takes this node out of the org: as member
		// leave, the org learns of it first.
		if _, err := s.leaving.leaveBy(ctx, kind, ledger.MachineRef{Machine: m.ID}, "this machine was removed from the org by its own node"); err != nil {
			return api.MachineInfo{}, err
		}
		return s.Machine(ctx, m.ID)
	}
	if _, err := s.write(ctx, kind, ledger.MachineRef{Machine: m.ID}); err != nil {
		return api.MachineInfo{}, refused(err)
	}
	return s.Machine(ctx, m.ID)
}

// Members implements api.OrgAPI: the org's persons, each with their
// machines.
func (s *Service) Members(ctx context.Context) ([]api.MemberInfo, error) {
	if err := s.needOrg(); err != nil {
		return nil, err
	}
	var out []api.MemberInfo
	s.snapshot(func(st *ledger.State) { out = memberInfos(st) })
	return out, nil
}

// resolveMember finds a member (a person) by reference (ref.Resolve's rules;
// a member's name is the person's). A reference that names a machine
// instead is told so, with the machine's person.
func (s *Service) resolveMember(r string) (string, error) {
	var id string
	var err error
	s.snapshot(func(st *ledger.State) {
		id, err = ref.Resolve("member", "cshare member ls", r, memberCandidates(st))
		var se *api.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusNotFound {
			return
		}
		mid, merr := ref.Resolve("machine", "cshare machine ls", r, machineCandidates(st))
		if merr != nil {
			return
		}
		m := st.Machines[mid]
		p := "it acts for person " + PersonLabel(st, m.Owner)
		if st.Role(m.Owner) == "" {
			p += ", who is not a member"
		}
		err = api.Errorf(http.StatusNotFound, "%q is machine %s (%s), not a member: members are persons; %s (see cshare member ls)",
			api.Ellipsize(strings.TrimSpace(r)), m.Name, m.ID, p)
	})
	return id, err
}

// SetRole implements api.OrgAPI: only the owner promotes members to admin
// and demotes admins.
func (s *Service) SetRole(ctx context.Context, id, role string) (api.MemberInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.MemberInfo{}, err
	}
	if role != ledger.RoleMember && role != ledger.RoleAdmin {
		return api.MemberInfo{}, api.FieldErrorf(http.StatusBadRequest, "role", "role: %q is not a role a member can be given; allowed: member, admin (ownership moves with cshare org transfer --to PERSON)", api.Ellipsize(role))
	}
	target, err := s.resolveMember(id)
	if err != nil {
		return api.MemberInfo{}, err
	}
	var same bool
	s.snapshot(func(st *ledger.State) {
		switch {
		case st.Role(s.PersonIn(st)) != ledger.RoleOwner:
			err = api.Errorf(http.StatusForbidden, "%s; only the owner promotes members to admin and demotes admins", s.WhoAmI(st))
		case st.Role(target) == ledger.RoleOwner:
			err = api.Errorf(http.StatusConflict, "person %s is the owner; the owner's role changes only by handing ownership to an admin: cshare org transfer --to PERSON", PersonLabel(st, target))
		}
		same = st.Role(target) == role
	})
	if err != nil {
		return api.MemberInfo{}, err
	}
	if !same {
		if _, err := s.write(ctx, ledger.KindMemberRole, ledger.MemberRole{Member: target, Role: role}); err != nil {
			return api.MemberInfo{}, refused(err)
		}
	}
	var out api.MemberInfo
	s.snapshot(func(st *ledger.State) { out = memberInfoOf(st, target) })
	return out, nil
}

// RemoveMember implements api.OrgAPI: nobody removes the owner; only the
// owner removes admins; admins and the owner remove members; a person
// removing themselves is leaving. Removing a person removes every machine
// of theirs and ends their jobs.
func (s *Service) RemoveMember(ctx context.Context, id string) (string, error) {
	if err := s.needOrg(); err != nil {
		return "", err
	}
	target, err := s.resolveMember(id)
	if err != nil {
		return "", err
	}
	s.snapshot(func(st *ledger.State) {
		me := s.PersonIn(st)
		mine, theirs := st.Role(me), st.Role(target)
		switch {
		case theirs == ledger.RoleOwner && target == me:
			err = api.Errorf(http.StatusForbidden, "%s, and the owner cannot remove themselves: hand ownership to an admin first (cshare org transfer --to PERSON)", s.WhoAmI(st))
		case theirs == ledger.RoleOwner:
			err = api.Errorf(http.StatusForbidden, "person %s is the org's owner, whom nobody may remove; the owner hands ownership to an admin first (cshare org transfer --to PERSON)", PersonLabel(st, target))
		case target == me:
			// Leaving: any member may.
		case theirs == ledger.RoleAdmin && mine != ledger.RoleOwner:
			err = api.Errorf(http.StatusForbidden, "%s; only the owner removes admins (person %s is an admin)", s.WhoAmI(st), PersonLabel(st, target))
		case !st.IsAdmin(me):
			err = api.Errorf(http.StatusForbidden, "%s; only the owner and admins may remove members", s.WhoAmI(st))
		}
	})
	if err != nil {
		return "", err
	}
	if s.leaving.ownExit(func(st *ledger.State) bool { return target == s.PersonIn(st) }) {
		// Removing this machine's own person takes this node out of the
		// org: as member leave, the org learns of it first.
		if _, err := s.leaving.leaveBy(ctx, ledger.KindMemberRemove, ledger.MemberRef{Member: target}, "this machine's person removed themselves from the org"); err != nil {
			return "", err
		}
		return target, nil
	}
	_, err = s.write(ctx, ledger.KindMemberRemove, ledger.MemberRef{Member: target})
	return target, refused(err)
}

func machineCandidates(st *ledger.State) []ref.Candidate {
	ms := st.SortedMachines()
	out := make([]ref.Candidate, len(ms))
	for i, m := range ms {
		out[i] = ref.Candidate{ID: m.ID, Name: m.Name}
	}
	return out
}

func memberCandidates(st *ledger.State) []ref.Candidate {
	ms := st.SortedMembers()
	out := make([]ref.Candidate, len(ms))
	for i, m := range ms {
		out[i] = ref.Candidate{ID: m.ID, Name: personName(st, m.ID)}
	}
	return out
}
