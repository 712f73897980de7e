package orgsvc

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// Leaving an org (issue 17). A node is out of its org when, in the folded
// state, the org was deleted (org.delete, the owner's tombstone) or its own
// machine was removed or rejected (its person leaving or being removed
// removes it too). It then asks for a reset (Reset is closed): the node's
// Restart, which node.Run calls, closes the node, then Carry stops and
// removes this machine's runs of the org and moves the org's data
// (orgDataDirs) aside into <data-dir>/orgs/<org-id> (or deletes it:
// purge); the node starts again with the same options, API address and
// token, in no org. What belongs to
// the machine stays: node.key, user.key, node.yaml, listen.json, the API
// files, and the tombstones.
//
// A node keeps every tombstone it has seen in <data-dir>/tombstones/<org-id>
// (the raw org.delete entry) and serves them over p2p.TombstoneProtocol: a
// node that was down when its org was deleted, and comes back when every
// other node has already left the org (and gossips for it no more), asks the
// machines its redial loop reaches, and accepts a tombstone only when
// checkTombstone does.

// orgDataDirs are the data dir's entries that belong to the org: the ledger
// store (entries, address book, the results' write-ahead records), the
// items' output, and the instances' working directories.
var orgDataDirs = []string{"ledger", "logs", "work"}

const (
	archiveDir    = "orgs"       // <data-dir>/orgs/<org-id>: a left org's data
	TombstonesDir = "tombstones" // <data-dir>/tombstones/<org-id>: raw org.delete entries
)

// Leaving is a node's way out of its org: asked for at most once per
// service; the node's Restart carries it out (Exit, then Carry).
type Leaving struct {
	s     *Service
	mu    sync.Mutex
	ch    chan struct{} // closed when asked; made on first use
	held  int           // Leave, DeleteOrg or Join is running: it decides
	asked bool
	org   string
	why   string
	purge bool
	dest  string // where the org's data goes ("" with purge)
}

// Exit is the exit asked for (Asked false when none).
type Exit struct {
	Asked bool
	Org   string
	Why   string
	Purge bool
	Dest  string // where the org's data goes ("" with purge)
}

func (l *Leaving) chLocked() chan struct{} {
	if l.ch == nil {
		l.ch = make(chan struct{})
	}
	return l.ch
}

// Reset is closed when the node is out of its org and must be started
// again in no org: the node's Restart (node.Run calls it).
func (l *Leaving) Reset() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.chLocked()
}

// orgExit says why machine me is out of the org that st is the state of,
// or "" when it is not (or st has no org yet).
func orgExit(st *ledger.State, me string) string {
	if st.Org == "" {
		return ""
	}
	if st.Deleted {
		return "the owner deleted the org"
	}
	m := st.Machines[me]
	if m == nil {
		return ""
	}
	switch m.Status {
	case ledger.MachineRemoved:
		if st.Members[m.Owner] == nil {
			return "this machine's person left the org or was removed from it" + byWhom(st, me)
		}
		return "this machine was removed from the org" + byWhom(st, me)
	case ledger.MachineRejected:
		return "this machine's registration was rejected" + byWhom(st, me)
	}
	return ""
}

// byWhom says who made machine me's last change of status and when (the
// entry's advisory time), or "" when the ledger does not say.
func byWhom(st *ledger.State, me string) string {
	ev, ok := ownStanding(st, me)
	if !ok || ev.By == "" {
		return ""
	}
	return " by " + personName(st, ev.By) + " at " + api.FormatTime(time.UnixMilli(ev.Time))
}

// holdExit keeps checkExit from acting while an operation that changes this
// machine's standing runs (a join fetches a ledger in which this machine may
// be removed from an earlier time; leave and delete reset when their entry
// has reached a peer). The returned release looks again.
func (l *Leaving) holdExit() (release func()) {
	l.mu.Lock()
	l.held++
	l.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			l.held--
			l.mu.Unlock()
			l.CheckExit()
		})
	}
}

// CheckExit asks for a reset when the ledger says this node is out of its
// org (keeping the tombstone first when the org was deleted). It runs after
// every ledger change and at start.
func (l *Leaving) CheckExit() {
	l.mu.Lock()
	skip := l.held > 0 || l.asked
	l.mu.Unlock()
	if skip {
		return
	}
	var why, org string
	var tomb []byte
	st := l.s.d.Ledger.Snapshot().State
	why, org = orgExit(st, l.s.idStr), st.Org
	if why != "" && st.Deleted {
		lg, unlock := l.s.d.Ledger.ReadLog()
		tomb = tombstoneOf(lg)
		unlock()
	}
	if why == "" {
		return
	}
	if tomb != nil {
		l.saveTombstone(org, tomb)
	}
	l.requestExit(org, why, false)
}

// requestExit asks for a reset out of org, for the reason why, and returns
// where the org's data will be ("" when purged). Only the first request
// counts; later ones return its answer.
func (l *Leaving) requestExit(org, why string, purge bool) (dest string, purged bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.asked {
		return l.dest, l.purge
	}
	if !purge {
		dest = archivePath(l.s.d.DataDir, org)
	}
	l.asked, l.org, l.why, l.purge, l.dest = true, org, why, purge, dest
	close(l.chLocked())
	l.s.d.Log.Debug("leaving the org", "org", org, "why", why)
	return dest, purge
}

// archivePath is a directory under <dataDir>/orgs that does not exist yet
// for org's data: orgs/<org-id>, or orgs/<org-id>.2, .3, ... when this
// machine left the same org before.
func archivePath(dataDir, org string) string {
	name := org
	if c, err := cid.Decode(org); err != nil || c.String() != org {
		name = "unknown-org" // never: an org ID is its genesis CID
	}
	base := filepath.Join(dataDir, archiveDir, name)
	p := base
	for k := 2; ; k++ {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			return p
		}
		p = base + "." + strconv.Itoa(k)
	}
}

// Exit is the exit asked for so far.
func (l *Leaving) Exit() Exit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Exit{Asked: l.asked, Org: l.org, Why: l.why, Purge: l.purge, Dest: l.dest}
}

// Carry carries out e once the node is closed (the node's Restart): it
// stops and removes this machine's runs of the org and moves the org's
// data aside (or deletes it), so the node starts again in no org.
func (l *Leaving) Carry(e Exit) error {
	if !e.Asked {
		return nil
	}
	l.removeRuns(e.Org)
	if err := moveOrgData(l.s.d.DataDir, e.Dest, e.Purge); err != nil {
		return fmt.Errorf("node: could not move the data of org %s aside: %w", e.Org, err)
	}
	where := e.Dest
	if e.Purge {
		where = "deleted (--purge)"
	}
	l.s.d.Log.Info("left the org", "org", e.Org, "why", e.Why, "old_data", where)
	l.recordLeft(api.PastOrg{Org: e.Org, Why: e.Why, At: l.s.now().UTC().Format(time.RFC3339), OldData: where})
	return nil
}

// Leave implements api.LeaveAPI: this machine's person leaves the org (a
// member.remove of itself, which removes all its machines), the entry is
// pushed to a peer, and the node resets. The owner must transfer the org
// first.
func (l *Leaving) Leave(ctx context.Context, req api.LeaveRequest) (api.LeftOrg, error) {
	if err := l.s.needOrg(); err != nil {
		return api.LeftOrg{}, err
	}
	release := l.holdExit()
	var person, role, org, name string
	approved := false
	l.s.snapshot(func(st *ledger.State) {
		person = st.PersonOf(l.s.idStr)
		role, org, name = st.Role(person), st.Org, st.Name
		m := st.Machines[l.s.idStr]
		approved = m != nil && m.Status == ledger.MachineApproved
	})
	if role == ledger.RoleOwner && approved {
		release()
		return api.LeftOrg{}, api.Errorf(http.StatusConflict, "the owner cannot leave: transfer ownership first with cshare org transfer --to PERSON")
	}
	if person == "" || role == "" || !approved {
		// A pending machine has no say in the org yet (its entries would
		// have no effect), whether or not its person is a member through
		// other machines: it leaves by resetting alone, and its person
		// stays as they are.
		why := "this machine left the org before it was approved"
		if role != "" {
			why += fmt.Sprintf("; its person is still a %s through their other machines", role)
		}
		defer release()
		return l.left(org, name, why, req.Purge, "")
	}
	return l.exitBy(ctx, release, ledger.KindMemberRemove, ledger.MemberRef{Member: person}, org, name,
		"this machine's person left the org", req.Purge)
}

// ownExit reports whether, in the current state, cond holds.
func (l *Leaving) ownExit(cond func(st *ledger.State) bool) (ok bool) {
	l.s.snapshot(func(st *ledger.State) { ok = cond(st) })
	return ok
}

// leaveBy writes an entry that takes this machine out of its org, other
// than member leave (a member removing themselves, a machine removing
// itself), through exitBy: the org learns of it before the node resets.
// The org's data is archived, as after any exit.
func (l *Leaving) leaveBy(ctx context.Context, kind string, payload any, why string) (api.LeftOrg, error) {
	release := l.holdExit()
	var org, name string
	l.s.snapshot(func(st *ledger.State) { org, name = st.Org, st.Name })
	res, err := l.exitBy(ctx, release, kind, payload, org, name, why, false)
	if err == nil && res.Warning != "" {
		l.s.d.Log.Warn(res.Warning)
	}
	return res, err
}

// exitBy writes the entry (kind, payload) that takes this machine out of
// its org (its person leaving or removed, its own machine removed), as
// member leave does: a node never leaves before the org knows (issue 27).
// With other approved machines in the org and none of them connected, it
// fails with one line and writes nothing. Once written, the entry is pushed
// to a peer; the node resets when one has it. When none has it within
// pushWait, the command answers with a warning and the node stays in the
// org, pushing, until one has it (or the node is closed). release is the
// caller's holdExit, which exitBy takes over.
func (l *Leaving) exitBy(ctx context.Context, release func(), kind string, payload any, org, name, why string, purge bool) (api.LeftOrg, error) {
	peers := l.s.d.Peers.OrgMachines()
	if len(peers) > 0 && !slices.ContainsFunc(peers, l.s.d.Host.Connected) {
		release()
		return api.LeftOrg{}, api.Errorf(http.StatusServiceUnavailable,
			"no other machine of the org is connected, so none would learn that this machine left; nothing changed: try again when one is (cshare node status shows peers)")
	}
	e, err := l.s.write(ctx, kind, payload)
	if err != nil {
		release()
		return api.LeftOrg{}, refused(err)
	}
	if len(peers) == 0 {
		defer release()
		return l.left(org, name, why, purge, "")
	}
	if _, ok := l.pushEntry(ctx, org, e, peers); ok {
		defer release()
		return l.left(org, name, why, purge, "")
	}
	// Not received yet: keep holding the exit while pushing in the
	// background; the reset comes when a peer has the entry.
	l.s.spawn(func() {
		defer release()
		for l.s.ctx.Err() == nil {
			if _, ok := l.pushEntry(l.s.ctx, org, e, peers); ok {
				l.left(org, name, why, purge, "")
				return
			}
			select {
			case <-l.s.ctx.Done():
			case <-time.After(l.s.d.Interval):
			}
		}
	})
	dest := ""
	if !purge {
		dest = archivePath(l.s.d.DataDir, org)
	}
	return api.LeftOrg{Org: org, OrgName: name, Archive: dest, Purged: purge,
		Warning: fmt.Sprintf("the %s entry has not reached another machine of the org within %s; this machine stays in the org, trying, until one has it, and leaves then", kind, l.pushWait())}, nil
}

// DeleteOrg implements api.LeaveAPI: the owner writes the org's tombstone
// (org.delete, naming the org), keeps it, pushes it to a peer, and the node
// resets; every other node does when it folds the tombstone.
func (l *Leaving) DeleteOrg(ctx context.Context, req api.OrgDeleteRequest) (api.LeftOrg, error) {
	if err := l.s.needOrg(); err != nil {
		return api.LeftOrg{}, err
	}
	release := l.holdExit()
	defer release()
	var role, org, name string
	l.s.snapshot(func(st *ledger.State) {
		role, org, name = st.Role(st.PersonOf(l.s.idStr)), st.Org, st.Name
	})
	if role != ledger.RoleOwner {
		return api.LeftOrg{}, api.Errorf(http.StatusForbidden, "only the owner may delete the org; this machine's person is %s", aRole(role))
	}
	if req.Confirm == "" {
		return api.LeftOrg{}, api.FieldErrorf(http.StatusBadRequest, "confirm", "--confirm: required: the org's name, %s", name)
	}
	if req.Confirm != name {
		return api.LeftOrg{}, api.FieldErrorf(http.StatusBadRequest, "confirm", "--confirm: %s does not match the org's name %s", api.Ellipsize(req.Confirm), name)
	}
	peers := l.s.d.Peers.OrgMachines()
	e, err := l.s.write(ctx, ledger.KindOrgDelete, ledger.OrgDelete{Name: name})
	if err != nil {
		return api.LeftOrg{}, refused(err)
	}
	l.saveTombstone(org, e.Bytes())
	warn, _ := l.pushEntry(ctx, org, e, peers)
	return l.left(org, name, "this machine's person, the owner, deleted the org", req.Purge, warn)
}

// left asks for the reset and says where the data goes.
func (l *Leaving) left(org, name, why string, purge bool, warn string) (api.LeftOrg, error) {
	dest, purged := l.requestExit(org, why, purge)
	return api.LeftOrg{Org: org, OrgName: name, Archive: dest, Purged: purged, Warning: warn}, nil
}

func aRole(s string) string {
	switch s {
	case "":
		return "no member"
	case ledger.RoleAdmin, ledger.RoleOwner:
		return "an " + s
	}
	return "a " + s
}

// pushWait bounds how long leave and delete wait for their entry to reach
// a peer.
func (l *Leaving) pushWait() time.Duration {
	return min(max(3*l.s.d.Interval, 5*time.Second), 30*time.Second)
}

// pushEntry makes sure e reached at least one of peers (the org's other
// approved machines) that is connected: it announces e to each and asks
// them for it until one has it, for at most pushWait. It returns a warning
// when none had it by then ("" also when no peer is connected: there is
// nobody to tell); delivered says whether one had it.
func (l *Leaving) pushEntry(ctx context.Context, org string, e *ledger.Entry, peers []peer.ID) (warn string, delivered bool) {
	ctx, cancel := context.WithTimeout(ctx, l.pushWait())
	defer cancel()
	h := l.s.d.Host.LibP2P()
	heads := []cid.Cid{e.CID()}
	announced := map[peer.ID]bool{}
	for {
		connected := 0
		for _, p := range peers {
			if !l.s.d.Host.Connected(p) {
				continue
			}
			connected++
			if !announced[p] {
				if p2p.AnnounceHeads(ctx, h, p, org, heads) == nil {
					announced[p] = true
				}
			}
			if peerHas(ctx, h, p, org, e) {
				return "", true
			}
		}
		if connected == 0 {
			l.s.d.Log.Info("no other machine of the org is connected; nobody to tell", "kind", e.Kind)
			return "", false
		}
		select {
		case <-ctx.Done():
			l.s.d.Log.Warn("the entry reached no other machine before this node left", "kind", e.Kind, "cid", e.CID().String())
			return fmt.Sprintf("the %s entry reached no other machine of the org within %s; they learn of it when this machine's ledger reaches them, if ever", e.Kind, l.pushWait()), false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// peerHas asks p for e alone and reports whether p has it.
func peerHas(ctx context.Context, h host.Host, p peer.ID, org string, e *ledger.Entry) bool {
	has := false
	floor := e.Clock - 1
	err := p2p.FetchBlocks(ctx, h, p, org, []cid.Cid{e.CID()}, floor, func(raw [][]byte) error {
		for _, b := range raw {
			if ledger.CIDOf(b).Equals(e.CID()) {
				has = true
			}
		}
		return nil
	})
	return err == nil && has
}
