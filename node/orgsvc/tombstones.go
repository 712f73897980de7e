package orgsvc

// Tombstones (the raw org.delete entries this machine keeps and serves) and
// the record of the org this machine last left: see leave.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/internal/atomicfile"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

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

// TombstoneDir is <data-dir>/tombstones, served as a p2p.TombstoneSource.
type TombstoneDir string

// Tombstone implements p2p.TombstoneSource: the file named org, when org is
// an org ID (a CID in its canonical form, so never a path).
func (d TombstoneDir) Tombstone(org string) []byte {
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
func (l *Leaving) saveTombstone(org string, raw []byte) {
	c, err := cid.Decode(org)
	if err != nil || c.String() != org {
		return
	}
	dir := filepath.Join(l.s.d.DataDir, TombstonesDir)
	err = os.MkdirAll(dir, 0o700)
	if err == nil {
		err = atomicfile.WriteFile(filepath.Join(dir, org), raw, 0o600)
	}
	if err != nil {
		l.s.d.Log.Warn("could not keep the org's tombstone", "org", org, "err", err)
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
func (l *Leaving) tombstoneAskEvery() time.Duration { return max(l.s.d.Interval, 2*time.Second) }

// AskTombstones runs at each turn of the redial loop: when no machine of
// the org gossips with this node for it, it asks each machine of the org it
// is connected to (at most every tombstoneAskEvery) for the org's
// tombstone, and leaves the org on a valid one. asked is the loop's record
// of when it last asked each machine.
func (l *Leaving) AskTombstones(now time.Time, ids []peer.ID, asked map[peer.ID]time.Time) {
	gossiping, joined := l.s.d.Topics.GossipPeers()
	if !joined || len(ids) == 0 || gossiping > 0 {
		return
	}
	org := l.s.orgID()
	for _, p := range ids {
		if !l.s.d.Host.Connected(p) || now.Sub(asked[p]) < l.tombstoneAskEvery() {
			continue
		}
		asked[p] = now
		l.s.spawn(func() { l.askTombstone(p, org) })
	}
}

// askTombstone asks machine p for org's tombstone and, if it gives a valid
// one, keeps it and leaves the org.
func (l *Leaving) askTombstone(p peer.ID, org string) {
	ctx, c := context.WithTimeout(l.s.ctx, 10*time.Second)
	defer c()
	raw, err := p2p.FetchTombstone(ctx, l.s.d.Host.LibP2P(), p, org)
	if err != nil || raw == nil {
		return
	}
	var bad error
	var name string
	l.s.snapshot(func(st *ledger.State) {
		name = st.Name
		if st.Org != org {
			bad = errors.New("tombstone: this node is no longer in that org")
			return
		}
		bad = checkTombstone(st, raw)
	})
	if bad != nil {
		l.s.d.Log.Warn("a machine gave a tombstone this node does not accept", "machine", p.String(), "err", bad)
		return
	}
	l.mu.Lock()
	held := l.held > 0
	l.mu.Unlock()
	if held {
		return // asked again at the next turn
	}
	l.saveTombstone(org, raw)
	l.requestExit(org, fmt.Sprintf("the owner deleted the org %s while this node was away (tombstone from machine %s)", name, p), false)
}

// leftFile, in the data dir, records the org this machine last left and
// why, for node status: a machine removed while it was offline learns it
// when it comes back, and its user should not have to read the log.
const leftFile = "left.json"

// recordLeft records past, the org this machine left, for node status.
func (l *Leaving) recordLeft(past api.PastOrg) {
	b, _ := json.Marshal(past) // cannot fail: strings only
	if err := atomicfile.WriteFile(filepath.Join(l.s.d.DataDir, leftFile), b, 0o600); err != nil {
		l.s.d.Log.Warn("could not record why this machine left its org", "err", err)
	}
}

// LastLeft is what recordLeft wrote, or nil (none, or not readable: the
// file is ours, and only informative).
func (l *Leaving) LastLeft() *api.PastOrg {
	b, err := os.ReadFile(filepath.Join(l.s.d.DataDir, leftFile))
	if err != nil || len(b) > 64<<10 {
		return nil
	}
	var past api.PastOrg
	if json.Unmarshal(b, &past) != nil || past.Org == "" {
		return nil
	}
	return &past
}
