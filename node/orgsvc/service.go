// Package orgsvc is the node's org service (docs/design.md §11, §12, §13):
// what a machine is and does as a member of one org, apart from running its
// work. It owns
//
//   - persons: the person this machine acts for (its user.key and the
//     ledger's delegation), and the refusals that name them;
//   - the org's API: create, join (admission, catch-up, witness, register),
//     show, org key, invites, settings, transfer; machines (approve, reject,
//     remove) and members (roles, removal), checked before the fold checks
//     them again;
//   - witnessing: the redemptions this machine countersigns for joiners
//     (p2p.WitnessProtocol, p2p.AdmitProtocol) and its witness book;
//   - leaving (Leaving): the exit state and the reset it asks for, member
//     leave and org delete with the push of their entry to a peer, the
//     tombstones kept, served and asked for, the record of the org last
//     left, and the removal of an old org's runs;
//   - the node's side of the closed org: telling a former machine it is
//     out, serving a joiner the whole ledger, and holding dispatch once this
//     machine is approved.
//
// It reaches the node only through Deps; package node builds it after the
// peer service (node/peersvc), serves its protocols, and hands it and its
// Leaving to the API server (api.OrgAPI, api.LeaveAPI). Its goroutines end
// with the context given to New; Close waits for them.
package orgsvc

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// Ledger is the org's replica as the org service uses it (*replica.Replica).
type Ledger interface {
	// View runs fn with the state as of the last fold, without a lock.
	View(fn func(st *ledger.State))
	// Snapshot is the ledger as of the last fold, read without a lock.
	Snapshot() *replica.Snapshot
	// ReadLog is the log (the DAG) under the read lock, until unlock;
	// every fold waits meanwhile.
	ReadLog() (lg replica.Reader, unlock func())
	// Write signs, stores and folds an entry; a non-nil entry with an
	// error was written but kept without effect.
	Write(ctx context.Context, kind string, payload any) (*ledger.Entry, error)
	// DryRun applies a would-be entry to a copy of the state.
	DryRun(kind string, payload any) error
	// CatchUp fetches org's ledger from p.
	CatchUp(ctx context.Context, p peer.ID, org string) error
	// Org is the org's ID, "" in no org.
	Org() string
	IsApproved(id peer.ID) bool
	// Horizon is the entry that put p out of the org, if it is out.
	Horizon(p peer.ID) (last cid.Cid, out bool)
	// ExportHistory writes the entries this node still has to w
	// (replica.ReadHistory reads them back).
	ExportHistory(w io.Writer) (int, error)
}

// Host is the libp2p host as the org service uses it (*p2p.Host): pushes,
// tombstones, witness and admission requests.
type Host interface {
	LibP2P() host.Host
	Connected(id peer.ID) bool
	Peers() []peer.ID
	Addrs() []string
	Connect(ctx context.Context, addrs []string) error
	Admit(ctx context.Context, p peer.ID, org string, c ledger.Capability) error
	Gate() *p2p.Gate
}

// Signer signs this machine's capabilities and witnesses (*ledger.Signer).
type Signer interface {
	SignCapability(c ledger.Capability) ledger.Capability
	SignWitness(c ledger.Capability, joiner string, now int64) ledger.Witness
}

// Topics is the node's gossip for the org.
type Topics interface {
	// JoinTopics joins org's topics; TopicsJoined says whether it has.
	JoinTopics(org string) error
	TopicsJoined() bool
	// AfterJoin publishes this machine's hardware and a heartbeat.
	AfterJoin(ctx context.Context)
	// GossipPeers is how many peers gossip with this node for its org;
	// joined is false before it joined the org's topics.
	GossipPeers() (peers int, joined bool)
}

// Peers is the node's address book.
type Peers interface {
	RememberPeer(id string, addrs []string)
	// OrgMachines are the org's other approved machines.
	OrgMachines() []peer.ID
}

// Machines is what the node knows of machines beyond the ledger: liveness
// from heartbeats, and its own machine's state.
type Machines interface {
	// MachineName is the name this machine gives itself.
	MachineName() string
	MachineInfo(st *ledger.State, m *ledger.Machine, now time.Time) api.MachineInfo
	MachineStatus(id string, now time.Time) string
}

// Runs is the runtime, for the runs of an org this machine is not in.
type Runs interface {
	// EachDriver calls fn for each driver; false (and no call) before the
	// runtime is up.
	EachDriver(fn func(runtime.Driver)) bool
	// RemoveForeignContracts removes the contract instances of orgs that
	// foreign says this machine is not in.
	RemoveForeignContracts(ctx context.Context, foreign func(org string) bool)
}

// Deps is what the org service needs from the node. Every field is
// required.
type Deps struct {
	Ledger   Ledger
	Host     Host
	Signer   Signer
	Topics   Topics
	Peers    Peers
	Machines Machines
	Runs     Runs
	// HoldDispatch holds new items until this node caught up with a peer.
	HoldDispatch func(why string)
	// Machine is this machine's ID.
	Machine peer.ID
	// DataDir holds user.key, the tombstones, left.json and the orgs left.
	DataDir string
	// Bootstrap are the node's --bootstrap addresses, dialled at a join
	// beside the org key's.
	Bootstrap []string
	// Interval is the heartbeat interval: the pace of pushes and
	// tombstone requests.
	Interval time.Duration
	Now      func() time.Time
	Log      *slog.Logger
}

// The API serves the org (api.OrgAPI) and leaving it (api.LeaveAPI) from
// this service.
var (
	_ api.OrgAPI   = (*Service)(nil)
	_ api.LeaveAPI = (*Leaving)(nil)
)

// Service is the org service of one node. Its methods are safe for
// concurrent use.
type Service struct {
	d     Deps
	idStr string // d.Machine.String()
	ctx   context.Context

	bgMu    sync.Mutex
	bg      sync.WaitGroup // goroutines started with spawn
	closing bool

	leaving   *Leaving
	witnessed witnessBook // redemptions witnessed, their registers not yet seen (witness.go)
	approved  approval    // this machine approved at the last ledger change (closedorg.go)
}

// New builds the service; it starts nothing. Its goroutines (a push of a
// leaving entry, tombstone requests) end with ctx.
func New(ctx context.Context, d Deps) *Service {
	s := &Service{d: d, idStr: d.Machine.String(), ctx: ctx}
	s.leaving = &Leaving{s: s}
	return s
}

// Close waits for the service's goroutines (which end with the context
// given to New); it starts none after.
func (s *Service) Close() {
	s.bgMu.Lock()
	s.closing = true
	s.bgMu.Unlock()
	s.bg.Wait()
}

// spawn runs fn on a goroutine that Close waits for. After Close has begun
// it does nothing.
func (s *Service) spawn(fn func()) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.closing {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		fn()
	}()
}

// Leaving is the way out of the org (leave.go).
func (s *Service) Leaving() *Leaving { return s.leaving }

func (s *Service) now() time.Time { return s.d.Now() }

func (s *Service) orgID() string { return s.d.Ledger.Org() }

// snapshot runs fn with the state as of the last fold (no lock).
func (s *Service) snapshot(fn func(st *ledger.State)) { s.d.Ledger.View(fn) }

func (s *Service) write(ctx context.Context, kind string, payload any) (*ledger.Entry, error) {
	return s.d.Ledger.Write(ctx, kind, payload)
}

func (s *Service) needOrg() error {
	if s.orgID() == "" {
		return api.NoOrg()
	}
	return nil
}

// refused turns a fold verdict into an API error.
func refused(err error) error { return api.Refused(err) }

func badReq(err error) error { return api.BadRequest(err) }
