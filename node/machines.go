package node

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

type cidT = cid.Cid

// Machine liveness statuses shown to users.
const (
	StatusAvailable = "available"
	StatusBusy      = "busy"
	StatusOffline   = "offline"
)

func peerOf(addr string) (peer.ID, error) {
	m, err := ma.NewMultiaddr(addr)
	if err != nil {
		return "", err
	}
	ai, err := peer.AddrInfoFromP2pAddr(m)
	if err != nil {
		return "", err
	}
	return ai.ID, nil
}

// machineStatus derives a machine's status: the ledger's pending, rejected
// or removed; for approved machines, liveness from heartbeats.
func (n *Node) machineStatus(id string, now time.Time) string {
	lg, unlock := n.rep.ReadLog()
	status := ""
	if m := lg.State().Machines[id]; m != nil {
		status = m.Status // the fold changes it in place: read it under the lock
	}
	unlock()
	if status != ledger.MachineApproved || (id != n.idStr && !n.approvedNow()) {
		// A machine that is not approved itself is sent no heartbeat
		// (closed org): it does not know the others' liveness.
		return status
	}
	hb, _, online := n.liveness(id, now)
	if !online {
		return StatusOffline
	}
	if len(activeInstances(hb)) > 0 {
		return StatusBusy
	}
	return StatusAvailable
}

// liveness returns a machine's last heartbeat and whether it is online (a
// heartbeat within 3 of its intervals). This node is always online to itself.
func (n *Node) liveness(id string, now time.Time) (p2p.Heartbeat, time.Time, bool) {
	hb, at, ok := n.live.LastOf(id)
	if id == n.idStr {
		return hb, at, true
	}
	if !ok {
		return hb, at, false
	}
	iv := time.Duration(hb.Interval) * time.Millisecond
	if iv <= 0 {
		iv = n.interval
	}
	return hb, at, now.Sub(at) <= 3*iv
}

func (n *Node) machineInfo(st *ledger.State, m *ledger.Machine, now time.Time) api.MachineInfo {
	mi := api.MachineInfo{ID: m.ID, Name: m.Name, Owner: m.Owner, OwnerName: personName(st, m.Owner), TotalJobs: m.TotalJobs, Hardware: m.Hardware,
		Limits: m.Limits, Version: m.Version, Registered: api.FormatTime(time.UnixMilli(m.Registered))}
	if mi.Hardware.GPUs == nil {
		mi.Hardware.GPUs = []ledger.GPU{}
	}
	hb, at, _ := n.liveness(m.ID, now)
	if !at.IsZero() {
		mi.LastHeartbeat = api.FormatTime(at)
		mi.Addrs = hb.Addrs
		if hb.Version != "" {
			mi.Version = hb.Version
		}
		mi.Free = &api.Resources{Cores: hb.Free.Cores, MemoryMB: hb.Free.MemoryMB, DiskMB: hb.Free.DiskMB, GPUs: hb.Free.GPUs, Slots: hb.Free.Slots}
		jobs := map[string]bool{}
		for _, in := range activeInstances(hb) {
			jobs[in.Job] = true
		}
		mi.RunningJobs = len(jobs)
		mi.DiskFull = hb.DiskFull
	}
	if m.ID == n.id.String() {
		mi.DiskFull = n.disk.g.Full()
		mi.Addrs = n.host.Addrs()
		mi.Version = Version
		mi.RunningJobs = n.runningJobs()
	}
	return mi
}

// Machines implements api.Service.
func (n *Node) Machines(ctx context.Context) ([]api.MachineInfo, error) {
	if err := n.needOrg(); err != nil {
		return nil, err
	}
	now := n.now()
	var out []api.MachineInfo
	n.snapshot(func(st *ledger.State) {
		// Rendered under the ledger's lock: the fold changes machines and
		// members in place.
		out = make([]api.MachineInfo, 0, len(st.Machines))
		for _, m := range st.SortedMachines() {
			out = append(out, n.machineInfo(st, m, now))
		}
	})
	for i := range out {
		out[i].Status = n.machineStatus(out[i].ID, now)
	}
	return out, nil
}

// resolveMachine finds a machine by reference (resolveRef's rules) and
// returns a copy.
func (n *Node) resolveMachine(ref string) (*ledger.Machine, error) {
	var m *ledger.Machine
	var err error
	n.snapshot(func(st *ledger.State) {
		var id string
		if id, err = resolveRef("machine", "cshare machine ls", ref, machineCandidates(st)); err == nil {
			c := *st.Machines[id]
			m = &c
		}
	})
	return m, err
}

// Machine implements api.Service.
func (n *Node) Machine(ctx context.Context, id string) (api.MachineInfo, error) {
	if err := n.needOrg(); err != nil {
		return api.MachineInfo{}, err
	}
	m, err := n.resolveMachine(id)
	if err != nil {
		return api.MachineInfo{}, err
	}
	now := n.now()
	var mi api.MachineInfo
	n.snapshot(func(st *ledger.State) {
		mi = n.machineInfo(st, m, now)
		if cur := st.Machines[m.ID]; cur != nil {
			mi.History = machineHistory(st, cur.History)
		}
	})
	mi.Status = n.machineStatus(m.ID, now)
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

// MachineAction implements api.Service.
func (n *Node) MachineAction(ctx context.Context, id, action string) (api.MachineInfo, error) {
	if err := n.needOrg(); err != nil {
		return api.MachineInfo{}, err
	}
	m, err := n.resolveMachine(id)
	if err != nil {
		return api.MachineInfo{}, err
	}
	var admin bool
	var me string
	n.snapshot(func(st *ledger.State) {
		me = n.personIn(st)
		admin = st.IsAdmin(me)
	})
	var kind string
	switch action {
	case "approve", "reject":
		if !admin {
			return api.MachineInfo{}, n.refuse("only the owner and admins may " + action + " machines")
		}
		if m.Status != ledger.MachinePending {
			return api.MachineInfo{}, api.Errorf(http.StatusConflict, "machine %s (%s) is %s, not pending", m.Name, m.ID, m.Status)
		}
		kind = ledger.KindMachineApprove
		if action == "reject" {
			kind = ledger.KindMachineReject
		}
	case "remove":
		if !admin && m.ID != n.idStr && m.Owner != me {
			return api.MachineInfo{}, n.refuse("only the owner, admins and the person a machine acts for may remove it; machine " + m.ID + " acts for another person")
		}
		if m.Status == ledger.MachineRemoved {
			return api.MachineInfo{}, api.Errorf(http.StatusConflict, "machine %s is already removed", m.ID)
		}
		kind = ledger.KindMachineRemove
	default:
		return api.MachineInfo{}, api.Errorf(http.StatusBadRequest, "unknown machine action %q; allowed: approve, reject, remove", api.Ellipsize(action))
	}
	if kind == ledger.KindMachineRemove && m.ID == n.idStr {
		// Removing this machine takes this node out of the org: as member
		// leave, the org learns of it first.
		if _, err := n.leaveBy(ctx, kind, ledger.MachineRef{Machine: m.ID}, "this machine was removed from the org by its own node"); err != nil {
			return api.MachineInfo{}, err
		}
		return n.Machine(ctx, m.ID)
	}
	if _, err := n.write(ctx, kind, ledger.MachineRef{Machine: m.ID}); err != nil {
		return api.MachineInfo{}, refused(err)
	}
	return n.Machine(ctx, m.ID)
}

// Members implements api.Service: the org's persons, each with their
// machines.
func (n *Node) Members(ctx context.Context) ([]api.MemberInfo, error) {
	if err := n.needOrg(); err != nil {
		return nil, err
	}
	var out []api.MemberInfo
	n.snapshot(func(st *ledger.State) { out = memberInfos(st) })
	return out, nil
}

// resolveMember finds a member (a person) by reference (resolveRef's rules;
// a member's name is the person's). A reference that names a machine
// instead is told so, with the machine's person.
func (n *Node) resolveMember(ref string) (string, error) {
	var id string
	var err error
	n.snapshot(func(st *ledger.State) {
		id, err = resolveRef("member", "cshare member ls", ref, memberCandidates(st))
		var se *api.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusNotFound {
			return
		}
		mid, merr := resolveRef("machine", "cshare machine ls", ref, machineCandidates(st))
		if merr != nil {
			return
		}
		m := st.Machines[mid]
		p := "it acts for person " + personLabel(st, m.Owner)
		if st.Role(m.Owner) == "" {
			p += ", who is not a member"
		}
		err = api.Errorf(http.StatusNotFound, "%q is machine %s (%s), not a member: members are persons; %s (see cshare member ls)",
			api.Ellipsize(strings.TrimSpace(ref)), m.Name, m.ID, p)
	})
	return id, err
}

// SetRole implements api.Service: only the owner promotes members to admin
// and demotes admins.
func (n *Node) SetRole(ctx context.Context, id, role string) (api.MemberInfo, error) {
	if err := n.needOrg(); err != nil {
		return api.MemberInfo{}, err
	}
	if role != ledger.RoleMember && role != ledger.RoleAdmin {
		return api.MemberInfo{}, api.FieldErrorf(http.StatusBadRequest, "role", "role: %q is not a role a member can be given; allowed: member, admin (ownership moves with cshare org transfer --to PERSON)", api.Ellipsize(role))
	}
	target, err := n.resolveMember(id)
	if err != nil {
		return api.MemberInfo{}, err
	}
	var same bool
	n.snapshot(func(st *ledger.State) {
		switch {
		case st.Role(n.personIn(st)) != ledger.RoleOwner:
			err = api.Errorf(http.StatusForbidden, "%s; only the owner promotes members to admin and demotes admins", n.whoAmI(st))
		case st.Role(target) == ledger.RoleOwner:
			err = api.Errorf(http.StatusConflict, "person %s is the owner; the owner's role changes only by handing ownership to an admin: cshare org transfer --to PERSON", personLabel(st, target))
		}
		same = st.Role(target) == role
	})
	if err != nil {
		return api.MemberInfo{}, err
	}
	if !same {
		if _, err := n.write(ctx, ledger.KindMemberRole, ledger.MemberRole{Member: target, Role: role}); err != nil {
			return api.MemberInfo{}, refused(err)
		}
	}
	var out api.MemberInfo
	n.snapshot(func(st *ledger.State) { out = memberInfoOf(st, target) })
	return out, nil
}

// RemoveMember implements api.Service: nobody removes the owner; only the
// owner removes admins; admins and the owner remove members; a person
// removing themselves is leaving. Removing a person removes every machine
// of theirs and ends their jobs.
func (n *Node) RemoveMember(ctx context.Context, id string) (string, error) {
	if err := n.needOrg(); err != nil {
		return "", err
	}
	target, err := n.resolveMember(id)
	if err != nil {
		return "", err
	}
	n.snapshot(func(st *ledger.State) {
		me := n.personIn(st)
		mine, theirs := st.Role(me), st.Role(target)
		switch {
		case theirs == ledger.RoleOwner && target == me:
			err = api.Errorf(http.StatusForbidden, "%s, and the owner cannot remove themselves: hand ownership to an admin first (cshare org transfer --to PERSON)", n.whoAmI(st))
		case theirs == ledger.RoleOwner:
			err = api.Errorf(http.StatusForbidden, "person %s is the org's owner, whom nobody may remove; the owner hands ownership to an admin first (cshare org transfer --to PERSON)", personLabel(st, target))
		case target == me:
			// Leaving: any member may.
		case theirs == ledger.RoleAdmin && mine != ledger.RoleOwner:
			err = api.Errorf(http.StatusForbidden, "%s; only the owner removes admins (person %s is an admin)", n.whoAmI(st), personLabel(st, target))
		case !st.IsAdmin(me):
			err = api.Errorf(http.StatusForbidden, "%s; only the owner and admins may remove members", n.whoAmI(st))
		}
	})
	if err != nil {
		return "", err
	}
	if n.ownExit(func(st *ledger.State) bool { return target == n.personIn(st) }) {
		// Removing this machine's own person takes this node out of the
		// org: as member leave, the org learns of it first.
		if _, err := n.leaveBy(ctx, ledger.KindMemberRemove, ledger.MemberRef{Member: target}, "this machine's person removed themselves from the org"); err != nil {
			return "", err
		}
		return target, nil
	}
	_, err = n.write(ctx, ledger.KindMemberRemove, ledger.MemberRef{Member: target})
	return target, refused(err)
}
