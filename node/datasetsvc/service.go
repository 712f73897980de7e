// Package datasetsvc is the node's dataset service (docs/design.md §15):
// the pure parts (UnixFS import, walk, export, CAR, the block exchange's
// wire) are package dataset's; this package owns what a node keeps and
// does about datasets. It owns
//
//   - the datasets' API: add (an import from a path this machine reads,
//     with its progress), list, show (with the online machines that hold
//     one), remove, get (fetch, then write out), import and export of a CAR,
//     checked before the fold checks them again;
//   - the blocks: the blockstore over the store's data blocks, the pins of
//     imports in progress, and the collector of the blocks no dataset of
//     the ledger reaches, with the lock that keeps it from running while
//     blocks are being added;
//   - the block exchange between machines: bitswap and the bulk blocks
//     protocol behind the ledger's access rules (blockACL), and the have
//     protocol;
//   - datasets for jobs: resolving a job's --dataset mounts, fetching and
//     materialising a dataset under <data dir>/datasets/<CID>, waiting for
//     it (Wait), the mounts and environment of an instance (Mounts), and the
//     fetches' progress for heartbeats and job reasons;
//   - the dataset loop (Run), which collects the blocks and materialised
//     trees no dataset or active job uses.
//
// It reaches the node only through Deps; package node builds it after the
// org service, serves its protocols (StartExchange), runs its loop, and
// hands it to the API server (api.DatasetsAPI).
package datasetsvc

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/store"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// Ledger is the org's replica as the dataset service uses it
// (*replica.Replica).
type Ledger interface {
	// View runs fn with the state as of the last fold, without a lock.
	View(fn func(st *ledger.State))
	// Write signs, stores and folds an entry; a non-nil entry with an
	// error was written but kept without effect.
	Write(ctx context.Context, kind string, payload any) (*ledger.Entry, error)
	// Org is the org's ID, "" in no org.
	Org() string
}

// Host is the libp2p host the exchange and the have protocol run on
// (*p2p.Host).
type Host interface {
	LibP2P() host.Host
	// Bulk is the host to open the exchange's streams through: a stream
	// to a machine reached only through a relay waits for the direct
	// connection being punched to it, if one is (p2p.Host.Bulk).
	Bulk() host.Host
	// Path is how this machine reaches p: "direct", "relayed" or "".
	Path(p peer.ID) string
}

// Store is the store's data blocks and the pins of imports in progress
// (*store.Store), beneath Deps.Blocks.
type Store interface {
	ForEachDataCID(fn func(c cid.Cid) error) error
	ForEachDataPin(fn func(p store.Pin, c cid.Cid) error) error
	DeleteDataPins(ids []string) error
	DeleteDataBlocks(cids []cid.Cid) error
}

// Persons says whom this machine acts for (*orgsvc.Service).
type Persons interface {
	// PersonIn is this machine's person read from st.
	PersonIn(st *ledger.State) string
	// WhoAmI begins a refusal: who this machine acts for, and their role.
	WhoAmI(st *ledger.State) string
}

// Peers is liveness from the org's heartbeats.
type Peers interface {
	// Liveness is machine id's last heartbeat, when it was seen, and
	// whether it is online at now.
	Liveness(id string, now time.Time) (p2p.Heartbeat, time.Time, bool)
	// OnlinePeers are the latest heartbeats of the other machines online
	// at now.
	OnlinePeers(now time.Time) []p2p.Seen
}

// Deps is what the dataset service needs from the node. Every field is
// required.
type Deps struct {
	Ledger  Ledger
	Host    Host
	Store   Store
	Blocks  *dataset.Blockstore // over Store
	Persons Persons
	Peers   Peers
	// Machine is this machine's ID.
	Machine string
	// DataDir holds the materialised datasets (datasets/<CID>).
	DataDir string
	// Interval is the heartbeat interval: the dataset loop's pace.
	Interval time.Duration
	// Kick wakes the scheduler (a fetch for a job ended).
	Kick func()
	// Spawn runs fn on a goroutine the node's Close waits for (after it
	// cancels the context given to New).
	Spawn func(fn func())
	Now   func() time.Time
	Log   *slog.Logger
}

// The API serves the datasets (api.DatasetsAPI) from this service.
var _ api.DatasetsAPI = (*Service)(nil)

// Service is the dataset service of one node. Its methods are safe for
// concurrent use.
type Service struct {
	d   Deps
	ctx context.Context

	blocks *dataset.Blockstore
	// adding is held (read) by imports and fetches, (write) by collect.
	adding   sync.RWMutex
	mu       sync.Mutex
	progress map[string]*atomic.Int64
	xch      *exchange // nil until StartExchange

	jf jobFetches // datasets fetched for jobs (jobs.go)
}

// New builds the service; it starts nothing. Its fetches and exchange end
// with ctx.
func New(ctx context.Context, d Deps) *Service {
	return &Service{d: d, ctx: ctx, blocks: d.Blocks, progress: map[string]*atomic.Int64{}}
}

// StartExchange serves the block exchange and the have protocol on the
// host.
func (s *Service) StartExchange() {
	s.xch = &exchange{}
	s.xch.x = dataset.NewExchange(s.ctx, s.d.Host.Bulk(), s.blocks, s.allowBlock)
	dataset.ServeHave(s.d.Host.LibP2P(), s.peerAsksHave)
}

// Close stops the exchange.
func (s *Service) Close() {
	if s.xch != nil {
		_ = s.xch.x.Close()
	}
}

// Run is the dataset loop: it collects the blocks and materialised trees of
// removed datasets (whoever removed them) when the ledger's datasets
// change, and trees of ended jobs, until ctx ends.
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(max(s.d.Interval, 2*time.Second))
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var key string
		s.snapshot(func(st *ledger.State) {
			key = datasetsKey(st)
			if st.Deleted {
				key = "\x00deleted"
			}
		})
		if key != last {
			if err := s.Collect(ctx); err != nil && ctx.Err() == nil {
				s.d.Log.Warn("dataset blocks not collected", "err", err)
			}
			last = key
		}
		s.collectMaterialised(ctx)
	}
}

func (s *Service) now() time.Time { return s.d.Now() }

// snapshot runs fn with the state as of the last fold (no lock).
func (s *Service) snapshot(fn func(st *ledger.State)) { s.d.Ledger.View(fn) }

func (s *Service) write(ctx context.Context, kind string, payload any) (*ledger.Entry, error) {
	return s.d.Ledger.Write(ctx, kind, payload)
}

func (s *Service) needOrg() error {
	if s.d.Ledger.Org() == "" {
		return api.NoOrg()
	}
	return nil
}
