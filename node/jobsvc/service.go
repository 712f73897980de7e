// Package jobsvc is the node's jobs API (docs/design.md §3.3, §3.5, §18):
// what a person asks of the org's jobs through this machine. It owns
//
//   - submitting a job: its spec from the request, the fold's own checks,
//     the image check on this machine, and the warning for a job no
//     machine fits (submit.go);
//   - listing jobs, a page at a time, and showing one with its live
//     instances from the scheduler's read view and the heartbeats of
//     online machines (jobs.go, info.go);
//   - modifying and cancelling a job, by its submitter, admins and the
//     owner (jobs.go);
//   - listing a job's items and their runs, streamed without holding them
//     (items.go);
//   - item output: read here or fetched from the machine that ran the
//     item, and the source that serves this machine's outputs over the
//     logs protocol (logs.go).
//
// It reaches the node only through Deps and keeps no state of its own
// beyond them: package node builds it after the scheduler, serves its
// LogSource, and hands it to the API server (api.JobsAPI).
package jobsvc

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// Ledger is the org's replica as the jobs API uses it (*replica.Replica).
type Ledger interface {
	// View runs fn with the state as of the last fold, without a lock.
	View(fn func(st *ledger.State))
	// Write signs, stores and folds an entry; a non-nil entry with an
	// error was written but kept without effect.
	Write(ctx context.Context, kind string, payload any) (*ledger.Entry, error)
	// Org is the org's ID, "" in no org.
	Org() string
	// ArchivedPage is a page of a finished job's items with their runs,
	// from this machine's disk, once it has left the State
	// (replica.ErrNotArchived when this machine joined after).
	ArchivedPage(id string, page int) (ledger.ArchivedPage, error)
}

// Scheduler is the scheduler's read side (*sched.Scheduler).
type Scheduler interface {
	// View is the latest published read view (never nil).
	View() *sched.View
	// RunningOn is the machine that runs item of job now, or "".
	RunningOn(job string, item int64) string
}

// Persons is the person this machine acts for (*orgsvc.Service).
type Persons interface {
	// PersonIn is this machine's person read from st.
	PersonIn(st *ledger.State) string
	// WhoAmI begins a refusal: who this machine acts for, and their role.
	WhoAmI(st *ledger.State) string
}

// Mounts resolves a job's --dataset values (NAME|CID:/path) into mounts of
// datasets this machine's person may read.
type Mounts interface {
	ResolveMounts(vals []string) ([]ledger.DatasetMount, error)
}

// Fetches says what a job waits for while its datasets are fetched.
type Fetches interface {
	// FetchReason is "fetching dataset N (x of y MB)" while this machine,
	// or another online one, fetches a dataset j mounts; else "".
	FetchReason(j *ledger.Job) string
}

// Peers is what the node knows of the org's other machines.
type Peers interface {
	// OnlinePeers are the latest heartbeats of the other machines online
	// at now.
	OnlinePeers(now time.Time) []p2p.Seen
	// EnsureConnected dials machine p with the addresses the node knows
	// for it when it is not connected.
	EnsureConnected(ctx context.Context, p peer.ID)
}

// Host is the libp2p host (*p2p.Host), to fetch an item's output from the
// machine that ran it.
type Host interface {
	LibP2P() host.Host
	// Bulk is the host to fetch item output through (p2p.Host.Bulk).
	Bulk() host.Host
	// Path is how this machine reaches p: "direct", "relayed" or "".
	Path(p peer.ID) string
}

// Logs is the item output store (*logs.Store).
type Logs interface {
	Read(job string, item int64) ([]byte, error)
	Open(job string, item int64) (io.ReadCloser, int64, error)
}

// Drivers is the runtime's driver registry (*runtime.Registry): a docker
// job's image is checked on its "docker" driver.
type Drivers interface {
	Why(name string) (string, bool)
	EnsureImage(ctx context.Context, name, image string, auth *runtime.RegistryAuth) error
}

// Deps is what the jobs API needs from the node. Every field is required.
type Deps struct {
	Ledger    Ledger
	Scheduler Scheduler
	Persons   Persons
	Mounts    Mounts
	Fetches   Fetches
	Peers     Peers
	Host      Host
	Logs      Logs
	Drivers   Drivers
	// RegistryAuth is the credentials to pull an image with (a contract's
	// or job's sealed ones, else node.yaml's).
	RegistryAuth runtime.AuthSource
	// Kick wakes the scheduler to plan now.
	Kick func()
	// Machine is this machine's ID.
	Machine string
	Now     func() time.Time
	Log     *slog.Logger
}

// The API serves the jobs (api.JobsAPI) from this service.
var _ api.JobsAPI = (*Service)(nil)

// Service is the jobs API of one node. Its methods are safe for concurrent
// use.
type Service struct {
	d Deps
}

// New builds the service; it starts nothing.
func New(d Deps) *Service { return &Service{d: d} }

func (s *Service) now() time.Time { return s.d.Now() }

func (s *Service) orgID() string { return s.d.Ledger.Org() }

// snapshot runs fn with the state as of the last fold (no lock).
func (s *Service) snapshot(fn func(st *ledger.State)) { s.d.Ledger.View(fn) }

func (s *Service) write(ctx context.Context, kind string, payload any) (*ledger.Entry, error) {
	return s.d.Ledger.Write(ctx, kind, payload)
}

func (s *Service) personIn(st *ledger.State) string { return s.d.Persons.PersonIn(st) }

func (s *Service) whoAmI(st *ledger.State) string { return s.d.Persons.WhoAmI(st) }

func (s *Service) needOrg() error {
	if s.orgID() == "" {
		return api.NoOrg()
	}
	return nil
}

// refused turns a fold verdict into an API error.
func refused(err error) error { return api.Refused(err) }

func badReq(err error) error { return api.BadRequest(err) }
