// Package marketsvc is the node's side of the market (docs/design.md §14):
// the pure rules are package market's, this package owns what a node
// keeps and does about them. It owns
//
//   - the offer book: the org's offers heard on the offers topic (checked,
//     kept while heard, dropped at their end or on a withdrawal), this
//     machine's own offers (saved in the data dir, republished), and the
//     heartbeats received per machine over the last day (reliability);
//   - the renter's contract API: request, list, show, stop/start/rm,
//     extend, usage, read from and written to the ledger;
//   - the host's loop: answering requests for this machine's offers,
//     making its contract containers follow the ledger, and acknowledging
//     the moves they followed (contract.ack);
//   - witnessing the moves of contracts between two other persons as they
//     reach this machine (contract.witness; billing.go);
//   - the reservations running contracts hold, which the scheduler takes
//     out of the machines before SmartShare plans.
//
// It reaches the node only through Deps; package node builds it, runs its
// loop (Run), joins it to an org's topics (Join) and closes it (Close).
package marketsvc

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/hw"
)

// Ledger is the org's replica as the market uses it (*replica.Replica).
type Ledger interface {
	// View runs fn with the state as of the last fold, without a lock.
	View(fn func(st *ledger.State))
	// Write signs, stores and folds an entry; a non-nil entry with an
	// error was written but kept without effect.
	Write(ctx context.Context, kind string, payload any) (*ledger.Entry, error)
	// Org is the org's ID, "" in no org.
	Org() string
}

// Signer signs this machine's offers and withdrawals (*ledger.Signer).
type Signer interface {
	SignOffer(org string, o market.Offer) ledger.SignedOffer
	SignOfferWithdrawal(org, id string) ledger.OfferWithdrawal
}

// Topics joins an org's offers topic (*p2p.Host).
type Topics interface {
	JoinOffers(org string, check p2p.OfferCheck) (*p2p.Offers, error)
	Gate() *p2p.Gate
}

// Beats delivers the org's heartbeats (*p2p.Org), for reliability.
type Beats interface {
	OnHeartbeat(fn func(hb p2p.Heartbeat))
}

// Drivers is the runtime's driver registry (*runtime.Registry): contract
// containers run on its "docker" driver.
type Drivers interface {
	Get(name string) (runtime.Driver, bool)
	Why(name string) (string, bool)
	EnsureImage(ctx context.Context, name, image string, auth *runtime.RegistryAuth) error
}

// Deps is what the market needs from the node. Every field is required.
type Deps struct {
	Ledger  Ledger
	Signer  Signer
	Topics  Topics
	Drivers Drivers
	// Machine is this machine's ID; Person the person it acts for now
	// (its person in the ledger, else its key's).
	Machine string
	Person  func() string
	// Hardware is this machine's inventory (its GPUs' UUIDs for Docker).
	Hardware hw.Hardware
	// RegistryAuth is the credentials to pull an image with (a contract's
	// or job's sealed ones, else node.yaml's).
	RegistryAuth runtime.AuthSource
	// AgeRecipient is this machine's age recipient, put in its offers.
	AgeRecipient string
	// JupyterToken is a jupyter-mode contract's token as this machine,
	// its host, derives it for its renter (node/jupyter.Token).
	JupyterToken func(contract, renter string) (string, error)
	// DataDir holds this machine's own offers (offersFile).
	DataDir string
	// Interval is the heartbeat interval, for reliability.
	Interval time.Duration
	Now      func() time.Time
	Log      *slog.Logger
}

// The API serves the market (api.MarketAPI) from this service.
var _ api.MarketAPI = (*Service)(nil)

// Service is the market of one node. Its methods are safe for concurrent
// use.
type Service struct {
	d Deps

	bookOnce sync.Once
	bk       *offerBook
	host     *contractHost
	wg       sync.WaitGroup // the republishing loop
}

// New builds the service; it starts nothing.
func New(d Deps) *Service {
	return &Service{d: d, host: &contractHost{started: map[string]int64{}, answered: map[string]bool{},
		billing: billingBook{acked: map[string]bool{}}}}
}

// Close waits for the republishing loop (which ends with the context
// given to Join) and leaves the offers topic.
func (s *Service) Close() {
	s.wg.Wait()
	b := s.book()
	b.mu.Lock()
	t := b.topic
	b.topic = nil
	b.mu.Unlock()
	if t != nil {
		t.Close()
	}
}

func (s *Service) orgID() string { return s.d.Ledger.Org() }

func (s *Service) needOrg() error {
	if s.orgID() == "" {
		return api.NoOrg()
	}
	return nil
}

// personIn is this machine's person read from st (a machine st does not
// know acts for itself).
func (s *Service) personIn(st *ledger.State) string {
	if p := st.PersonOf(s.d.Machine); p != "" {
		return p
	}
	return s.d.Machine
}
