package orgsvc

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/internal/userkey"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// Persons (docs/design.md §11). This machine acts for one person: the one whose
// key (user.key in the data dir) signed the delegation its genesis or
// machine.register entry carried. Every question of authority and
// visibility the node asks is asked of that person: s.Person() here, the
// fold's verdict (ledger.State.Role, CanSee) on every node.
//
// The node's checks repeat the fold's rules in front of it, so that a
// refused request gets one line naming the rule and leaves no entry; the
// fold decides. They govern what this node's API, CLI and dashboard do and
// show: every machine of the org holds the whole ledger.

// personKey loads this data dir's person key, creating one when none exists,
// named name, else the daemon's $USER when that is a valid name, else
// "user-" and the end of the machine ID. It returns the key's signer too.
func (s *Service) personKey(name string) (*userkey.Key, *ledger.Signer, error) {
	if name == "" {
		name = s.fallbackUserName()
	}
	k, _, err := userkey.LoadOrCreate(s.d.DataDir, name)
	if err != nil {
		return nil, nil, api.Errorf(http.StatusInternalServerError, "person key: %v", err)
	}
	ps, err := ledger.NewSigner(k.Priv)
	if err != nil {
		return nil, nil, api.Errorf(http.StatusInternalServerError, "person key %s: %v", userkey.Path(s.d.DataDir), err)
	}
	return k, ps, nil
}

// fallbackUserName names a person key created without a name.
func (s *Service) fallbackUserName() string {
	if u := os.Getenv("USER"); u != "" && text.CheckName("name", u) == nil {
		return u
	}
	id := s.idStr
	if len(id) > 6 {
		id = id[len(id)-6:]
	}
	return "user-" + id
}

// checkUserName checks a request's user_name ("" is allowed: the fallback).
func checkUserName(s string) error {
	if s == "" {
		return nil
	}
	if err := text.CheckName("user_name", s); err != nil {
		return api.FieldErrorf(http.StatusBadRequest, "user_name", "%v", err)
	}
	return nil
}

// Person is the person this machine acts for: its person in the org's
// ledger, else (in no org yet, or before its registration is folded) its
// person key's ID, else its machine ID.
func (s *Service) Person() string {
	var p string
	s.snapshot(func(st *ledger.State) { p = st.PersonOf(s.idStr) })
	if p != "" {
		return p
	}
	if k, err := userkey.Load(s.d.DataDir); err == nil {
		return k.ID
	}
	return s.idStr
}

// personIn is s.Person() read from st (without its fallback to the key
// file: a machine st does not know has no role there anyway).
func (s *Service) PersonIn(st *ledger.State) string {
	if p := st.PersonOf(s.idStr); p != "" {
		return p
	}
	return s.idStr
}

// personName is st.PersonName(id).
func personName(st *ledger.State, id string) string { return st.PersonName(id) }

// PersonLabel is "NAME (ID)", or the ID alone when no name is known.
func PersonLabel(st *ledger.State, id string) string {
	if name := personName(st, id); name != "" {
		return name + " (" + id + ")"
	}
	return id
}

// roleWords says what role a person holds, after their label.
func roleWords(role string) string {
	switch role {
	case ledger.RoleOwner:
		return "the owner"
	case ledger.RoleAdmin:
		return "an admin"
	case ledger.RoleMember:
		return "a member"
	}
	return "not a member"
}

// WhoAmI says which person this machine acts for and their role, to begin
// a refusal: "this machine acts for person alice (12D3…), a member".
func (s *Service) WhoAmI(st *ledger.State) string {
	p := s.PersonIn(st)
	return "this machine acts for person " + PersonLabel(st, p) + ", " + roleWords(st.Role(p))
}

// Refuse is a 403 naming who asked and the rule: "WHO; RULE".
func (s *Service) Refuse(rule string) error {
	var who string
	s.snapshot(func(st *ledger.State) { who = s.WhoAmI(st) })
	return api.Errorf(http.StatusForbidden, "%s; %s", who, rule)
}

// memberInfos lists the members (persons) of st with their machines
// (approved and pending, by ID).
func memberInfos(st *ledger.State) []api.MemberInfo {
	machines := map[string][]string{}
	for _, m := range st.SortedMachines() {
		if m.Status == ledger.MachineApproved || m.Status == ledger.MachinePending {
			machines[m.Owner] = append(machines[m.Owner], m.ID)
		}
	}
	out := []api.MemberInfo{}
	for _, m := range st.SortedMembers() {
		out = append(out, memberInfo(st, m, machines[m.ID]))
	}
	return out
}

func memberInfo(st *ledger.State, m *ledger.Member, machines []string) api.MemberInfo {
	mi := api.MemberInfo{ID: m.ID, Role: m.Role, Name: personName(st, m.ID), Joined: api.FormatTime(time.UnixMilli(m.Joined)), Machines: machines}
	if mi.Machines == nil {
		mi.Machines = []string{}
	}
	slices.Sort(mi.Machines)
	for _, id := range mi.Machines {
		mi.Capped = mi.Capped || st.IsCapped(id)
	}
	return mi
}

// memberInfoOf is person id as a member (their role "" if they are none).
func memberInfoOf(st *ledger.State, id string) api.MemberInfo {
	for _, mi := range memberInfos(st) {
		if mi.ID == id {
			return mi
		}
	}
	return api.MemberInfo{ID: id, Name: personName(st, id), Machines: []string{}}
}

// TransferOrg implements api.OrgAPI: the owner makes an admin the owner,
// and becomes an admin.
func (s *Service) TransferOrg(ctx context.Context, to string) (api.OrgInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.OrgInfo{}, err
	}
	target, err := s.resolveMember(to)
	if err != nil {
		var se *api.StatusError
		if errors.As(err, &se) && se.Field == "" {
			se.Field = "to"
		}
		return api.OrgInfo{}, err
	}
	s.snapshot(func(st *ledger.State) {
		me := s.PersonIn(st)
		switch {
		case st.Role(me) != ledger.RoleOwner:
			err = api.Errorf(http.StatusForbidden, "%s; only the owner may transfer ownership of the org", s.WhoAmI(st))
		case target == me:
			err = api.Errorf(http.StatusConflict, "person %s is already the owner; there is nothing to transfer", PersonLabel(st, target))
		case st.Role(target) != ledger.RoleAdmin:
			err = api.Errorf(http.StatusConflict, "person %s is %s: ownership goes to an admin only; make them an admin first: cshare member set-role %s admin",
				PersonLabel(st, target), roleWords(st.Role(target)), target)
		}
	})
	if err != nil {
		return api.OrgInfo{}, err
	}
	if _, err := s.write(ctx, ledger.KindOrgTransfer, ledger.OrgTransfer{To: target}); err != nil {
		return api.OrgInfo{}, refused(err)
	}
	return s.Org(ctx)
}
