package node

import (
	"context"
	"net/http"
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
	m := lg.State().Machines[id]
	unlock()
	if m == nil {
		return ""
	}
	if m.Status != ledger.MachineApproved {
		return m.Status
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
	mi := api.MachineInfo{ID: m.ID, Name: m.Name, Owner: m.Owner, TotalJobs: m.TotalJobs, Hardware: m.Hardware,
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
	}
	if m.ID == n.id.String() {
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
	var ms []*ledger.Machine
	var st *ledger.State
	lg, unlock := n.rep.ReadLog()
	st = lg.State()
	for _, m := range st.SortedMachines() {
		c := *m
		ms = append(ms, &c)
	}
	unlock()
	out := make([]api.MachineInfo, 0, len(ms))
	for _, m := range ms {
		mi := n.machineInfo(st, m, now)
		mi.Status = n.machineStatus(m.ID, now)
		out = append(out, mi)
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
	n.snapshot(func(st *ledger.State) { mi = n.machineInfo(st, m, now) })
	mi.Status = n.machineStatus(m.ID, now)
	return mi, nil
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
	me := n.id.String()
	var admin bool
	n.snapshot(func(st *ledger.State) { admin = st.IsAdmin(me) })
	var kind string
	switch action {
	case "approve", "reject":
		if !admin {
			return api.MachineInfo{}, api.Errorf(http.StatusForbidden, "only the owner and admins may %s machines; this node's identity %s is not an admin", action, me)
		}
		if m.Status != ledger.MachinePending {
			return api.MachineInfo{}, api.Errorf(http.StatusConflict, "machine %s (%s) is %s, not pending", m.Name, m.ID, m.Status)
		}
		kind = ledger.KindMachineApprove
		if action == "reject" {
			kind = ledger.KindMachineReject
		}
	case "remove":
		if !admin && m.ID != me && m.Owner != me {
			return api.MachineInfo{}, api.Errorf(http.StatusForbidden, "only an admin or the machine's own operator may remove machine %s", m.ID)
		}
		if m.Status == ledger.MachineRemoved {
			return api.MachineInfo{}, api.Errorf(http.StatusConflict, "machine %s is already removed", m.ID)
		}
		kind = ledger.KindMachineRemove
	default:
		return api.MachineInfo{}, api.Errorf(http.StatusBadRequest, "unknown machine action %q; allowed: approve, reject, remove", api.Ellipsize(action))
	}
	if _, err := n.write(ctx, kind, ledger.MachineRef{Machine: m.ID}); err != nil {
		return api.MachineInfo{}, refused(err)
	}
	return n.Machine(ctx, m.ID)
}

// Members implements api.Service.
func (n *Node) Members(ctx context.Context) ([]api.MemberInfo, error) {
	if err := n.needOrg(); err != nil {
		return nil, err
	}
	var out []api.MemberInfo
	n.snapshot(func(st *ledger.State) {
		count := map[string]int{}
		names := map[string]string{}
		for _, m := range st.Machines {
			if m.Status != ledger.MachineRemoved && m.Status != ledger.MachineRejected {
				count[m.Owner]++
			}
			if m.ID == m.Owner {
				names[m.Owner] = m.Name
			}
		}
		for _, m := range st.SortedMembers() {
			out = append(out, api.MemberInfo{ID: m.ID, Role: m.Role, Name: names[m.ID], Joined: api.FormatTime(time.UnixMilli(m.Joined)), Machines: count[m.ID]})
		}
	})
	if out == nil {
		out = []api.MemberInfo{}
	}
	return out, nil
}

// resolveMember finds a member's ID by reference (resolveRef's rules; a
// member's name is that of the machine with its ID).
func (n *Node) resolveMember(ref string) (string, error) {
	var id string
	var err error
	n.snapshot(func(st *ledger.State) { id, err = resolveRef("member", "cshare member ls", ref, memberCandidates(st)) })
	return id, err
}

// SetRole implements api.Service.
func (n *Node) SetRole(ctx context.Context, id, role string) (api.MemberInfo, error) {
	if err := n.needAdmin("change roles"); err != nil {
		return api.MemberInfo{}, err
	}
	if role != ledger.RoleMember && role != ledger.RoleAdmin {
		return api.MemberInfo{}, api.FieldErrorf(http.StatusBadRequest, "role", "role: %q is not a role a member can be given; allowed: member, admin", api.Ellipsize(role))
	}
	mid, err := n.resolveMember(id)
	if err != nil {
		return api.MemberInfo{}, err
	}
	if _, err := n.write(ctx, ledger.KindMemberRole, ledger.MemberRole{Member: mid, Role: role}); err != nil {
		return api.MemberInfo{}, refused(err)
	}
	var out api.MemberInfo
	n.snapshot(func(st *ledger.State) { out = api.MemberInfo{ID: mid, Role: st.Role(mid)} })
	return out, nil
}

// RemoveMember implements api.Service.
func (n *Node) RemoveMember(ctx context.Context, id string) (string, error) {
	if err := n.needOrg(); err != nil {
		return "", err
	}
	mid, err := n.resolveMember(id)
	if err != nil {
		return "", err
	}
	if mid != n.id.String() {
		if err := n.needAdmin("remove members"); err != nil {
			return "", err
		}
	}
	if n.isOwner(mid) {
		return "", api.Errorf(http.StatusConflict, "member %s is the org's owner, who cannot be removed: an org keeps its owner, and ownership cannot be transferred yet", mid)
	}
	_, err = n.write(ctx, ledger.KindMemberRemove, ledger.MemberRef{Member: mid})
	return mid, refused(err)
}

// isOwner reports whether member id owns the org.
func (n *Node) isOwner(id string) bool {
	var ok bool
	n.snapshot(func(st *ledger.State) { ok = st.Role(id) == ledger.RoleOwner })
	return ok
}
