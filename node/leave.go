package node

import (
	"context"
	"encoding/json"
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

	"github.com/cshare/cshare/internal/atomicfile"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// Leaving an org (issue 17). A node is out of its org when, in the folded
// state, the org was deleted (org.delete, the owner's tombstone) or its own
// machine was removed or rejected (its person leaving or being removed
// removes it too). It then asks for a reset (Reset is closed): Restart, which
// node.Run calls, closes the node, stops and removes this machine's runs of
// the org, moves the org's data (orgDataDirs) aside into
// <data-dir>/orgs/<org-id> (or deletes it: purge), and starts the node again
// with the same options, API address and token, in no org. What belongs to
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
	tombstonesDir = "tombstones" // <data-dir>/tombstones/<org-id>: raw org.delete entries
)

// exitState is a node's way out of its org: asked for at most once per
// Node; Restart carries it out.
type exitState struct {
	mu    sync.Mutex
	ch    chan struct{} // closed when asked; made on first use
	held  int           // Leave, DeleteOrg or Join is running: it decides
	asked bool
	org   string
	why   string
	purge bool
	dest  string // where the org's data goes ("" with purge)
}

func (e *exitState) chLocked() chan struct{} {
	if e.ch == nil {
		e.ch = make(chan struct{})
	}
	return e.ch
}

// Reset is closed when the node is out of its org and must be started
// again in no org: call Restart (node.Run does).
func (n *Node) Reset() <-chan struct{} {
	n.exit.mu.Lock()
	defer n.exit.mu.Unlock()
	return n.exit.chLocked()
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
func (n *Node) holdExit() (release func()) {
	n.exit.mu.Lock()
	n.exit.held++
	n.exit.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			n.exit.mu.Lock()
			n.exit.held--
			n.exit.mu.Unlock()
			n.checkExit()
		})
	}
}

// checkExit asks for a reset when the ledger says this node is out of its
// org (keeping the tombstone first when the org was deleted). It runs after
// every ledger change and at start.
func (n *Node) checkExit() {
	n.exit.mu.Lock()
	skip := n.exit.held > 0 || n.exit.asked
	n.exit.mu.Unlock()
	if skip || n.rep == nil {
		return
	}
	var why, org string
	var tomb []byte
	lg, unlock := n.rep.ReadLog()
	st := lg.State()
	why, org = orgExit(st, n.idStr), st.Org
	if why != "" && st.Deleted {
		tomb = tombstoneOf(lg)
	}
	unlock()
	if why == "" {
		return
	}
	if tomb != nil {
		n.saveTombstone(org, tomb)
	}
	n.requestExit(org, why, false)
}

// requestExit asks for a reset out of org, for the reason why, and returns
// where the org's data will be ("" when purged). Only the first request
// counts; later ones return its answer.
func (n *Node) requestExit(org, why string, purge bool) (dest string, purged bool) {
	n.exit.mu.Lock()
	defer n.exit.mu.Unlock()
	if n.exit.asked {
		return n.exit.dest, n.exit.purge
	}
	if !purge {
		dest = archivePath(n.opts.DataDir, org)
	}
	n.exit.asked, n.exit.org, n.exit.why, n.exit.purge, n.exit.dest = true, org, why, purge, dest
	close(n.exit.chLocked())
	n.log.Debug("leaving the org", "org", org, "why", why)
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

// Restart closes the node and starts it again with the same options, on
// the API address it had and with the same token. When the node was out of
// its org (Reset is closed) it first stops and removes this machine's runs
// of that org and moves the org's data aside (or deletes it), so the new
// node is in no org. It returns the new node; on an error the old one is
// closed all the same.
func (n *Node) Restart(ctx context.Context) (*Node, error) {
	n.exit.mu.Lock()
	e := exitState{asked: n.exit.asked, org: n.exit.org, why: n.exit.why, purge: n.exit.purge, dest: n.exit.dest}
	n.exit.mu.Unlock()
	if err := n.Close(); err != nil {
		n.log.Warn("closing the node before it starts again", "err", err)
	}
	if e.asked {
		n.removeRuns(e.org)
		if err := moveOrgData(n.opts.DataDir, e.dest, e.purge); err != nil {
			return nil, fmt.Errorf("node: could not move the data of org %s aside: %w", e.org, err)
		}
		where := e.dest
		if e.purge {
			where = "deleted (--purge)"
		}
		n.log.Info("left the org", "org", e.org, "why", e.why, "old_data", where)
		n.recordLeft(api.PastOrg{Org: e.org, Why: e.why, At: n.now().UTC().Format(time.RFC3339), OldData: where})
	}
	opts := n.opts
	opts.API, opts.token = n.apiAddr, n.token
	return Start(ctx, opts)
}

// removeRuns stops and removes every run of org on this machine, whatever
// its job's state: the node is leaving the org. It runs after Close, so
// nothing supervises them any more.
func (n *Node) removeRuns(org string) {
	if org == "" || n.drivers == nil {
		return
	}
	n.drivers.Each(func(drv Driver) {
		ctx, c := context.WithTimeout(context.Background(), time.Minute)
		defer c()
		runs, err := drv.List(ctx, map[string]string{runtime.LabelOrg: org, runtime.LabelMachine: n.idStr})
		if err != nil {
			n.log.Warn("leaving the org: could not list its runs", "driver", drv.Name(), "err", err)
			return
		}
		for _, r := range runs {
			_ = drv.Stop(ctx, r.ID, 0)
			if err := drv.Remove(ctx, r.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
				n.log.Warn("leaving the org: could not remove a run", "driver", drv.Name(), "run", string(r.ID), "err", err)
			}
		}
	})
}

// removeForeignRuns stops and removes every run and contract instance of
// this machine that is labelled for an org other than the one the node is
// in (every one, in no org): the node left that org while they ran, or was
// down when it did (issue 27: a rental outlived its org). Start runs it,
// so it runs after every exit too. A run is looked at again just before it
// goes, so one of an org the node has just joined stays.
func (n *Node) removeForeignRuns() {
	if n.drivers == nil {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, time.Minute)
	defer cancel()
	foreign := func(org string) bool { return org != n.orgID() }
	n.drivers.Each(func(drv Driver) {
		runs, err := drv.List(ctx, map[string]string{runtime.LabelMachine: n.idStr})
		if err != nil {
			n.log.Debug("could not list this machine's runs", "driver", drv.Name(), "err", err)
			return
		}
		for _, r := range runs {
			if org := r.Labels[runtime.LabelOrg]; foreign(org) {
				_ = drv.Stop(ctx, r.ID, 0)
				if err := drv.Remove(ctx, r.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
					n.log.Warn("could not remove a run of an org this machine is not in", "driver", drv.Name(), "org", org, "run", string(r.ID), "err", err)
					continue
				}
				n.log.Info("removed a run of an org this machine is not in", "org", org, "run", string(r.ID))
			}
		}
	})
	n.market.RemoveForeign(ctx, foreign)
}

// moveOrgData moves the org's entries of dataDir (orgDataDirs) into dest,
// or deletes them when purge.
func moveOrgData(dataDir, dest string, purge bool) error {
	if !purge {
		if err := os.MkdirAll(dest, 0o700); err != nil {
			return err
		}
	}
	for _, name := range orgDataDirs {
		src := filepath.Join(dataDir, name)
		if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
			continue
		}
		var err error
		if purge {
			err = os.RemoveAll(src)
		} else {
			err = os.Rename(src, filepath.Join(dest, name))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Leave implements api.Service: this machine's person leaves the org (a
// member.remove of itself, which removes all its machines), the entry is
// pushed to a peer, and the node resets. The owner must transfer the org
// first.
func (n *Node) Leave(ctx context.Context, req api.LeaveRequest) (api.LeftOrg, error) {
	if err := n.needOrg(); err != nil {
		return api.LeftOrg{}, err
	}
	release := n.holdExit()
	var person, role, org, name string
	approved := false
	n.snapshot(func(st *ledger.State) {
		person = st.PersonOf(n.idStr)
		role, org, name = st.Role(person), st.Org, st.Name
		m := st.Machines[n.idStr]
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
		return n.left(org, name, why, req.Purge, "")
	}
	return n.exitBy(ctx, release, ledger.KindMemberRemove, ledger.MemberRef{Member: person}, org, name,
		"this machine's person left the org", req.Purge)
}

// ownExit reports whether, in the current state, cond holds.
func (n *Node) ownExit(cond func(st *ledger.State) bool) (ok bool) {
	n.snapshot(func(st *ledger.State) { ok = cond(st) })
	return ok
}

// leaveBy writes an entry that takes this machine out of its org, other
// than member leave (a member removing themselves, a machine removing
// itself), through exitBy: the org learns of it before the node resets.
// The org's data is archived, as after any exit.
func (n *Node) leaveBy(ctx context.Context, kind string, payload any, why string) (api.LeftOrg, error) {
	release := n.holdExit()
	var org, name string
	n.snapshot(func(st *ledger.State) { org, name = st.Org, st.Name })
	res, err := n.exitBy(ctx, release, kind, payload, org, name, why, false)
	if err == nil && res.Warning != "" {
		n.log.Warn(res.Warning)
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
func (n *Node) exitBy(ctx context.Context, release func(), kind string, payload any, org, name, why string, purge bool) (api.LeftOrg, error) {
	peers := n.orgMachines()
	if len(peers) > 0 && !slices.ContainsFunc(peers, n.host.Connected) {
		release()
		return api.LeftOrg{}, api.Errorf(http.StatusServiceUnavailable,
			"no other machine of the org is connected, so none would learn that this machine left; nothing changed: try again when one is (cshare node status shows peers)")
	}
	e, err := n.write(ctx, kind, payload)
	if err != nil {
		release()
		return api.LeftOrg{}, refused(err)
	}
	if len(peers) == 0 {
		defer release()
		return n.left(org, name, why, purge, "")
	}
	if _, ok := n.pushEntry(ctx, org, e, peers); ok {
		defer release()
		return n.left(org, name, why, purge, "")
	}
	// Not received yet: keep holding the exit while pushing in the
	// background; the reset comes when a peer has the entry.
	n.spawn(func() {
		defer release()
		for n.ctx.Err() == nil {
			if _, ok := n.pushEntry(n.ctx, org, e, peers); ok {
				n.left(org, name, why, purge, "")
				return
			}
			select {
			case <-n.ctx.Done():
			case <-time.After(n.interval):
			}
		}
	})
	dest := ""
	if !purge {
		dest = archivePath(n.opts.DataDir, org)
	}
	return api.LeftOrg{Org: org, OrgName: name, Archive: dest, Purged: purge,
		Warning: fmt.Sprintf("the %s entry has not reached another machine of the org within %s; this machine stays in the org, trying, until one has it, and leaves then", kind, n.pushWait())}, nil
}

// DeleteOrg implements api.Service: the owner writes the org's tombstone
// (org.delete, naming the org), keeps it, pushes it to a peer, and the node
// resets; every other node does when it folds the tombstone.
func (n *Node) DeleteOrg(ctx context.Context, req api.OrgDeleteRequest) (api.LeftOrg, error) {
	if err := n.needOrg(); err != nil {
		return api.LeftOrg{}, err
	}
	release := n.holdExit()
	defer release()
	var role, org, name string
	n.snapshot(func(st *ledger.State) {
		role, org, name = st.Role(st.PersonOf(n.idStr)), st.Org, st.Name
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
	peers := n.orgMachines()
	e, err := n.write(ctx, ledger.KindOrgDelete, ledger.OrgDelete{Name: name})
	if err != nil {
		return api.LeftOrg{}, refused(err)
	}
	n.saveTombstone(org, e.Bytes())
	warn, _ := n.pushEntry(ctx, org, e, peers)
	return n.left(org, name, "this machine's person, the owner, deleted the org", req.Purge, warn)
}

// left asks for the reset and says where the data goes.
func (n *Node) left(org, name, why string, purge bool, warn string) (api.LeftOrg, error) {
	dest, purged := n.requestExit(org, why, purge)
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
func (n *Node) pushWait() time.Duration {
	return min(max(3*n.interval, 5*time.Second), 30*time.Second)
}

// pushEntry makes sure e reached at least one of peers (the org's other
// approved machines) that is connected: it announces e to each and asks
// them for it until one has it, for at most pushWait. It returns a warning
// when none had it by then ("" also when no peer is connected: there is
// nobody to tell); delivered says whether one had it.
func (n *Node) pushEntry(ctx context.Context, org string, e *ledger.Entry, peers []peer.ID) (warn string, delivered bool) {
	ctx, cancel := context.WithTimeout(ctx, n.pushWait())
	defer cancel()
	h := n.host.LibP2P()
	heads := []cid.Cid{e.CID()}
	announced := map[peer.ID]bool{}
	for {
		connected := 0
		for _, p := range peers {
			if !n.host.Connected(p) {
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
			n.log.Info("no other machine of the org is connected; nobody to tell", "kind", e.Kind)
			return "", false
		}
		select {
		case <-ctx.Done():
			n.log.Warn("the entry reached no other machine before this node left", "kind", e.Kind, "cid", e.CID().String())
			return fmt.Sprintf("the %s entry reached no other machine of the org within %s; they learn of it when this machine's ledger reaches them, if ever", e.Kind, n.pushWait()), false
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

// tombstoneOf is the raw effective org.delete entry of the log, or nil.
func tombstoneOf(lg replica.Reader) []byte {
	es := lg.Entries()
	for i := len(es) - 1; i >= 0; i-- {
		if e := es[i]; e.Kind == ledger.KindOrgDelete && lg.Effective(e.CID()) {
			return e.Bytes()
		}
	}
	return nil
}

// tombstoneDir is <data-dir>/tombstones, served as a p2p.TombstoneSource.
type tombstoneDir string

// Tombstone implements p2p.TombstoneSource: the file named org, when org is
// an org ID (a CID in its canonical form, so never a path).
func (d tombstoneDir) Tombstone(org string) []byte {
	c, err := cid.Decode(org)
	if err != nil || c.String() != org {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(string(d), org))
	if err != nil || len(b) > ledger.MaxEntrySize {
		return nil
	}
	return b
}

// saveTombstone keeps org's raw org.delete entry.
func (n *Node) saveTombstone(org string, raw []byte) {
	c, err := cid.Decode(org)
	if err != nil || c.String() != org {
		return
	}
	dir := filepath.Join(n.opts.DataDir, tombstonesDir)
	err = os.MkdirAll(dir, 0o700)
	if err == nil {
		err = atomicfile.WriteFile(filepath.Join(dir, org), raw, 0o600)
	}
	if err != nil {
		n.log.Warn("could not keep the org's tombstone", "org", org, "err", err)
	}
}

// checkTombstone checks raw, a tombstone a peer gave for the org of st: it
// must decode and verify, be an org.delete of this org naming the org's
// name, and be signed by a machine that is, in st, an approved machine of
// the owner.
func checkTombstone(st *ledger.State, raw []byte) error {
	e, err := ledger.Decode(raw)
	if err != nil {
		return fmt.Errorf("tombstone: %w", err)
	}
	if e.Kind != ledger.KindOrgDelete {
		return fmt.Errorf("tombstone: an entry of kind %q, not %s", e.Kind, ledger.KindOrgDelete)
	}
	if st.Org == "" || e.Org != st.Org {
		return fmt.Errorf("tombstone: of org %s, not %s", e.Org, st.Org)
	}
	var p ledger.OrgDelete
	if err := ledger.DecodePayload(e.Payload, &p); err != nil {
		return fmt.Errorf("tombstone: payload: %w", err)
	}
	if p.Name != st.Name {
		return fmt.Errorf("tombstone: names %q, not the org's name %q", p.Name, st.Name)
	}
	m := st.Machines[e.AuthorString()]
	if m == nil || m.Status != ledger.MachineApproved || st.Owner == "" || m.Owner != st.Owner {
		return fmt.Errorf("tombstone: signed by %s, not an approved machine of the owner", e.AuthorString())
	}
	return nil
}

// tombstoneAskEvery is how often a node cut off from its org asks one
// machine again whether the org was deleted.
func (n *Node) tombstoneAskEvery() time.Duration { return max(n.interval, 2*time.Second) }

// askTombstones runs at each turn of the redial loop: when no machine of
// the org gossips with this node for it, it asks each machine of the org it
// is connected to (at most every tombstoneAskEvery) for the org's
// tombstone, and leaves the org on a valid one. asked is the loop's record
// of when it last asked each machine.
func (n *Node) askTombstones(now time.Time, ids []peer.ID, asked map[peer.ID]time.Time) {
	n.mu.RLock()
	o := n.org
	n.mu.RUnlock()
	if o == nil || len(ids) == 0 || len(o.Peers()) > 0 {
		return
	}
	org := n.orgID()
	for _, p := range ids {
		if !n.host.Connected(p) || now.Sub(asked[p]) < n.tombstoneAskEvery() {
			continue
		}
		asked[p] = now
		n.spawn(func() { n.askTombstone(p, org) })
	}
}

// askTombstone asks machine p for org's tombstone and, if it gives a valid
// one, keeps it and leaves the org.
func (n *Node) askTombstone(p peer.ID, org string) {
	ctx, c := context.WithTimeout(n.ctx, 10*time.Second)
	defer c()
	raw, err := p2p.FetchTombstone(ctx, n.host.LibP2P(), p, org)
	if err != nil || raw == nil {
		return
	}
	var bad error
	var name string
	n.snapshot(func(st *ledger.State) {
		name = st.Name
		if st.Org != org {
			bad = errors.New("tombstone: this node is no longer in that org")
			return
		}
		bad = checkTombstone(st, raw)
	})
	if bad != nil {
		n.log.Warn("a machine gave a tombstone this node does not accept", "machine", p.String(), "err", bad)
		return
	}
	n.exit.mu.Lock()
	held := n.exit.held > 0
	n.exit.mu.Unlock()
	if held {
		return // asked again at the next turn
	}
	n.saveTombstone(org, raw)
	n.requestExit(org, fmt.Sprintf("the owner deleted the org %s while this node was away (tombstone from machine %s)", name, p), false)
}

// leftFile, in the data dir, records the org this machine last left and
// why, for node status: a machine removed while it was offline learns it
// when it comes back, and its user should not have to read the log.
const leftFile = "left.json"

func (n *Node) recordLeft(l api.PastOrg) {
	b, _ := json.Marshal(l) // cannot fail: strings only
	if err := atomicfile.WriteFile(filepath.Join(n.opts.DataDir, leftFile), b, 0o600); err != nil {
		n.log.Warn("could not record why this machine left its org", "err", err)
	}
}

// lastLeft is what recordLeft wrote, or nil (none, or not readable: the
// file is ours, and only informative).
func (n *Node) lastLeft() *api.PastOrg {
	b, err := os.ReadFile(filepath.Join(n.opts.DataDir, leftFile))
	if err != nil || len(b) > 64<<10 {
		return nil
	}
	var l api.PastOrg
	if json.Unmarshal(b, &l) != nil || l.Org == "" {
		return nil
	}
	return &l
}
