package jobsvc

// Item output: job logs through the API, read here or fetched from the
// machine that ran the item over the logs protocol, whose source
// (LogSource) this file has.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/logs"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// JobLogs implements api.JobsAPI.
func (s *Service) JobLogs(ctx context.Context, id string, item int64) ([]byte, error) {
	if err := s.needOrg(); err != nil {
		return nil, err
	}
	j, err := s.resolveJob(id)
	if err != nil {
		return nil, err
	}
	if err := itemInRange(j.Spec, item); err != nil {
		return nil, api.FieldErrorf(http.StatusBadRequest, "item", "%v", err)
	}
	var it ledger.Item
	left := false
	s.snapshot(func(st *ledger.State) {
		if x := st.Jobs[j.ID]; x != nil && x.Archived == nil {
			it = x.Items.At(int(item - j.Spec.RangeStart))
		} else {
			left = true
		}
	})
	if left { // a finished job: its items are on disk, when this machine has them
		if it, err = s.archivedItem(j.ID, item-j.Spec.RangeStart); err != nil {
			if b, rerr := s.d.Logs.Read(j.ID, item); rerr == nil {
				return b, nil // this machine ran it
			}
			return nil, err // says where the items are
		}
	}
	// The output that counts is that of the run whose result the ledger
	// holds, kept by the machine that ran it; this machine may hold an
	// earlier attempt's (one preempted, say), which is not it.
	if it.Status != ledger.ItemPending && it.Machine != "" && it.Machine != s.d.Machine {
		return s.remoteLog(ctx, j.ID, item, it.Machine)
	}
	if it.Status == ledger.ItemPending {
		if m := s.d.Scheduler.RunningOn(j.ID, item); m != "" {
			return nil, api.Errorf(http.StatusNotFound, "item %d is running on machine %s; its output is kept when it ends", item, m)
		}
	}
	if b, err := s.d.Logs.Read(j.ID, item); err == nil {
		return b, nil
	}
	return nil, api.Errorf(http.StatusNotFound, "item %d has no output here yet (status: %s)", item, map[uint8]string{0: "pending", 1: "done", 2: "failed"}[it.Status])
}

// itemInRange says, naming the field, when item is not one of the job's.
func itemInRange(s ledger.JobSpec, item int64) error {
	if item < s.RangeStart || item > s.RangeEnd {
		return fmt.Errorf("item: %d is outside the job's range %d-%d", item, s.RangeStart, s.RangeEnd)
	}
	return nil
}

// remoteLogTimeout bounds the fetch of an item's output from the machine
// that ran it.
const remoteLogTimeout = 30 * time.Second

// remoteLog fetches an item's output from the machine that ran it, where it
// is kept (p2p.LogsProtocol).
func (s *Service) remoteLog(ctx context.Context, job string, item int64, machine string) ([]byte, error) {
	pid, err := peer.Decode(machine)
	if err != nil {
		return nil, api.Errorf(http.StatusNotFound, "item %d ran on machine %s, whose ID is not valid", item, machine)
	}
	ctx, cancel := context.WithTimeout(ctx, remoteLogTimeout)
	defer cancel()
	fetch := func() ([]byte, error) {
		s.d.Peers.EnsureConnected(ctx, pid)
		return p2p.FetchLog(ctx, s.d.Host.Bulk(), pid, p2p.LogsRequest{Org: s.orgID(), Job: job, Item: item}, runtime.LogCap)
	}
	out, err := fetch()
	for try := 1; try <= 3 && err != nil && !errors.Is(err, p2p.ErrNoLog) && !errors.Is(err, p2p.ErrLogsRefused) && ctx.Err() == nil; try++ {
		// The connection may have been reset under the stream (a machine
		// let into a topic is reconnected), leaving the peerstore no
		// address for a moment: again, a little later each time.
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(try) * 100 * time.Millisecond):
		}
		out, err = fetch()
	}
	switch {
	case err == nil:
		return out, nil
	case errors.Is(err, p2p.ErrNoLog):
		return nil, api.Errorf(http.StatusNotFound, "item %d ran on machine %s, which has no output for it (removed with its data dir?)", item, machine)
	default:
		return nil, api.Errorf(http.StatusBadGateway, "item %d ran on machine %s, which keeps its output, but could not send it: %v", item, machine, err)
	}
}

// LogSource serves this machine's item outputs to the org's machines
// (p2p.LogsProtocol): to the machines of the job's submitter and of admins.
// It needs only the replica and the logs store, so package node serves it
// before the service is built.
type LogSource struct {
	Ledger Ledger
	Logs   Logs
}

var _ p2p.LogSource = LogSource{}

// LogsOrg is the org the node belongs to ("" before it has one).
func (s LogSource) LogsOrg() string { return s.Ledger.Org() }

// MaySee lets machine p have the output of job's items when p is an
// approved machine of the org whose person may see the job (its submitter,
// an admin or the owner).
func (s LogSource) MaySee(p peer.ID, job string) error {
	var err error
	s.Ledger.View(func(st *ledger.State) { err = maySee(st, p.String(), job) })
	return err
}

func maySee(st *ledger.State, machine, job string) error {
	m := st.Machines[machine]
	if m == nil || m.Status != ledger.MachineApproved {
		return fmt.Errorf("%s is not an approved machine of org %s", machine, st.Org)
	}
	j := st.Jobs[job]
	if j == nil {
		return fmt.Errorf("job %s is not in this machine's ledger", job)
	}
	if !st.CanSee(m.Owner, j) {
		return fmt.Errorf("machine %s acts for person %s, who may not see job %s: only machines of its submitter, of admins and of the owner may", machine, m.Owner, job)
	}
	return nil
}

// OpenLog opens the output of an item of a job of the ledger: the job must
// be known here (which also keeps the name from reaching outside the logs
// directory) and the item in its range.
func (s LogSource) OpenLog(job string, item int64) (io.ReadCloser, int64, error) {
	var spec *ledger.JobSpec
	s.Ledger.View(func(st *ledger.State) {
		if j := st.Jobs[job]; j != nil {
			sp := j.Spec
			spec = &sp
		}
	})
	if spec == nil {
		return nil, 0, fmt.Errorf("job %s is not in this machine's ledger", job)
	}
	if err := itemInRange(*spec, item); err != nil {
		return nil, 0, err
	}
	r, size, err := s.Logs.Open(job, item)
	if errors.Is(err, logs.ErrNoLog) {
		return nil, 0, fmt.Errorf("%w: item %d of job %s", p2p.ErrNoLog, item, job)
	}
	return r, size, err
}
