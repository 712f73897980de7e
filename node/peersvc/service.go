// Package peersvc is the node's peer service (docs/design.md §3.8, §8):
// what one machine knows of, and does about, the org's other machines. It
// owns
//
//   - the address book: each machine's addresses, freshest first, kept in
//     the store's metadata (book.go);
//   - liveness: every machine's latest heartbeat and when it came, and the
//     statuses read from it (available, busy, offline);
//   - heartbeats: this machine's, sent every interval and on demand, and
//     the org's, received, recorded and handed to the scheduler's lease
//     book (heartbeat.go);
//   - healing: redialling every approved machine this node is not
//     connected to, resetting connections that lost their gossip stream,
//     and the pure schedule of redials (redial.go, reconnect.go);
//   - the catch-up gate: after a start or a pause, no new item until the
//     node has synced with a peer (catchup.go);
//   - merging the ledger's heads when they pile up (merge.go).
//
// It has its own locks and loops (Heartbeats, Redial) and reaches the node
// only through Deps; package node builds it right after the replica and
// the host, and hands it to the services that read liveness or hold
// dispatch. Its goroutines run on Deps.Spawn and end with the context
// given to New.
package peersvc

import (
	"context"
	"log/slog"
	"sort"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/p2p"
)

// Machine liveness statuses shown to users.
const (
	StatusAvailable = "available"
	StatusBusy      = "busy"
	StatusOffline   = "offline"
)

// Ledger is the org's replica as the peer service uses it
// (*replica.Replica).
type Ledger interface {
	// Snapshot is the ledger as of the last fold, read without a lock.
	Snapshot() *replica.Snapshot
	// Write signs, stores and folds an entry (a merge).
	Write(ctx context.Context, kind string, payload any) (*ledger.Entry, error)
	// Org is the org's ID, "" in no org.
	Org() string
	IsApproved(id peer.ID) bool
	// CatchUp fetches org's ledger from p.
	CatchUp(ctx context.Context, p peer.ID, org string) error
	// WantHeads fetches what a peer's heartbeat names and this node lacks.
	WantHeads(id peer.ID, heads []string)
	// LastAdded is when an entry was last added.
	LastAdded() time.Time
	// CheckpointDue and WriteCheckpoint: the org's checkpoints
	// (checkpoint.go).
	CheckpointDue(now time.Time) bool
	WriteCheckpoint(ctx context.Context) (*ledger.Entry, error)
	// Start, CompactTo and Prune: what stays in memory and on disk
	// (compact.go).
	Start() (start, top int)
	CompactTo(depth int) error
	Prune() (int, error)
}

// Host is the libp2p host as the peer service uses it (*p2p.Host).
type Host interface {
	LibP2P() host.Host
	Addrs() []string
	Peers() []peer.ID
	Connected(id peer.ID) bool
	PeerAddrs(id peer.ID) []string
	KeepAddrs(id peer.ID, addrs []string)
	DialPeer(ctx context.Context, id peer.ID, addrs []string) error
	ResetPeer(ctx context.Context, p peer.ID, addrs []string) error
	GossipWriter(p peer.ID) bool
}

// Meta is the store's metadata, where the address book is kept
// (*store.Store).
type Meta interface {
	Meta(key string) ([]byte, error)
	SetMeta(key string, val []byte) error
}

// Gossip is the org's topics (*p2p.Org).
type Gossip interface {
	PublishHeartbeat(ctx context.Context, hb p2p.Heartbeat) error
	// FetchSeen asks p for the latest heartbeat of every machine it saw.
	FetchSeen(ctx context.Context, p peer.ID) ([]p2p.Seen, error)
}

// Node is the rest of the node, as heartbeats and catch-ups reach it.
type Node interface {
	// Gossip is the org's topics, nil before the node joined them.
	Gossip() Gossip
	// Report fills in what this machine's heartbeat says of it: its
	// resources, instances, plan hash, dataset fetches and disk.
	Report(hb *p2p.Heartbeat)
	// ObserveLeases hands a peer's heartbeat to the scheduler's lease book.
	ObserveLeases(hb p2p.Heartbeat, now time.Time)
	// CaughtUp runs when the catch-up gate opens; it must not block.
	CaughtUp()
	// AskTombstones runs at each turn of the redial loop (see
	// orgsvc.Leaving.AskTombstones).
	AskTombstones(now time.Time, ids []peer.ID, asked map[peer.ID]time.Time)
}

// Deps is what the peer service needs from the node. Every field is
// required but MergeAbove.
type Deps struct {
	Ledger Ledger
	Host   Host
	Meta   Meta
	Node   Node
	// Kick wakes the scheduler to plan now; Nudge asks for a plan soon.
	Kick, Nudge func()
	// Heartbeats counts the heartbeats received.
	Heartbeats prometheus.Counter
	// Machine is this machine's ID; Version its agent's, in heartbeats.
	Machine peer.ID
	Version string
	// Interval is the heartbeat interval.
	Interval time.Duration
	// MergeAbove is the number of heads above which a ledger.merge is
	// written (merge.go); 0 writes none.
	MergeAbove int
	// Spawn runs fn on a goroutine the node's Close waits for.
	Spawn func(fn func())
	Now   func() time.Time
	Log   *slog.Logger
}

// Service is the peer service of one node. Its methods are safe for
// concurrent use.
type Service struct {
	d     Deps
	idStr string // d.Machine.String()
	ctx   context.Context

	live p2p.Liveness
	book book
	gate gate

	compacting atomic.Bool  // a compaction or prune runs (compact.go)
	prunedAt   atomic.Int64 // the top barrier's depth at the last prune
}

// New builds the peer service, with the address book the store holds. Its
// loops (Heartbeats, Redial) and catch-ups end with ctx.
func New(ctx context.Context, d Deps) *Service {
	s := &Service{d: d, idStr: d.Machine.String(), ctx: ctx}
	s.book.meta, s.book.log = d.Meta, d.Log
	s.book.load()
	return s
}

func (s *Service) now() time.Time { return s.d.Now() }

// onOwnClock moves t, read by p2p on the system clock (time.Now), onto the
// node's clock, keeping its age: liveness compares it with now(). The two
// differ when the node's clock is not time.Now (a FAKETIME skew); mixed, a
// clock ahead saw every fetched heartbeat as minutes old, every machine
// offline and its leases lapsed, and ran items others held (make chaos).
func (s *Service) onOwnClock(t time.Time) time.Time { return s.now().Add(-time.Since(t)) }

// approvedNow reports whether this machine is approved in the ledger.
func (s *Service) approvedNow() bool { return s.d.Ledger.IsApproved(s.d.Machine) }

// Liveness returns a machine's last heartbeat, when it came, and whether
// it is online (a heartbeat within 3 of its intervals). This node is
// always online to itself.
func (s *Service) Liveness(id string, now time.Time) (p2p.Heartbeat, time.Time, bool) {
	hb, at, ok := s.live.LastOf(id)
	if id == s.idStr {
		return hb, at, true
	}
	if !ok {
		return hb, at, false
	}
	iv := time.Duration(hb.Interval) * time.Millisecond
	if iv <= 0 {
		iv = s.d.Interval
	}
	return hb, at, now.Sub(at) <= 3*iv
}

// Last is machine id's latest heartbeat and when it came, if any
// (p2p.Liveness.LastOf).
func (s *Service) Last(id string) (p2p.Heartbeat, time.Time, bool) { return s.live.LastOf(id) }

// Gen is p2p.Liveness.Gen: it changes with every heartbeat recorded.
func (s *Service) Gen() uint64 { return s.live.Gen() }

// All is every machine's latest heartbeat, by machine ID.
func (s *Service) All() []p2p.Seen { return s.live.All() }

// OnlinePeers returns the latest heartbeats of the other machines that are
// online at now, by machine ID.
func (s *Service) OnlinePeers(now time.Time) []p2p.Seen {
	var out []p2p.Seen
	for _, m := range s.live.All() {
		if m.Heartbeat.Machine == s.idStr {
			continue
		}
		if _, _, online := s.Liveness(m.Heartbeat.Machine, now); online {
			out = append(out, m)
		}
	}
	return out
}

// PlanAgreement is how many online peers announce plan hash h, of how
// many.
func (s *Service) PlanAgreement(h string) (agree, peers int) {
	for _, m := range s.OnlinePeers(s.now()) {
		peers++
		if m.Heartbeat.PlanHash == h {
			agree++
		}
	}
	return agree, peers
}

// MachineStatus derives a machine's status: the ledger's pending, rejected
// or removed; for approved machines, liveness from heartbeats.
func (s *Service) MachineStatus(id string, now time.Time) string {
	status := ""
	if m := s.d.Ledger.Snapshot().State.Machines[id]; m != nil {
		status = m.Status
	}
	if status != ledger.MachineApproved || (id != s.idStr && !s.approvedNow()) {
		// A machine that is not approved itself is sent no heartbeat
		// (closed org): it does not know the others' liveness.
		return status
	}
	hb, _, online := s.Liveness(id, now)
	if !online {
		return StatusOffline
	}
	if len(sched.ActiveInstances(hb)) > 0 {
		return StatusBusy
	}
	return StatusAvailable
}

// OrgMachines returns the other approved machines of this node's org (none
// once this machine is removed or rejected).
func (s *Service) OrgMachines() (ids []peer.ID) {
	st := s.d.Ledger.Snapshot().State
	if st.Org == "" {
		return nil
	}
	if me := st.Machines[s.idStr]; me != nil && (me.Status == ledger.MachineRemoved || me.Status == ledger.MachineRejected) {
		return nil // no longer of the org: nobody to reach
	}
	for id, m := range st.Machines {
		if m.Status != ledger.MachineApproved {
			continue
		}
		if id == s.idStr {
			continue
		}
		if p, err := peer.Decode(id); err == nil {
			ids = append(ids, p)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Reconnecting reports whether this node has no peer at all while its org
// has other approved machines: it is cut off and trying to reach them.
func (s *Service) Reconnecting() bool {
	if len(s.d.Host.Peers()) > 0 {
		return false
	}
	return len(s.OrgMachines()) > 0
}
