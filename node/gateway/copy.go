package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"sync/atomic"

	"github.com/cshare/cshare/internal/tarcopy"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/ref"
	"github.com/cshare/cshare/runtime"
)

// Copying files in and out of a container (`contract cp`, `job cp`) with
// the runtime's archive calls (Docker's archive API): tar archives both
// ways, streamed. The container may run on another machine: the request
// then goes to that machine's node over ArchiveProtocol, which checks the
// asking machine's person as this node checks its own.

// copyTarget is a container path a person may copy to or from: the
// contract (its renter) or the job's running item (its submitter, admins).
type copyTarget struct {
	Job     bool
	ID      string
	Item    int64
	Path    string
	Driver  string
	Machine string // the machine that runs it
}

// resolveCopy resolves t's reference among what person may copy, read in
// st at now: a contract they rent that still has its container (running,
// stopped or expired), or a running item of a job they may see.
func resolveCopy(st *ledger.State, person string, t api.ArchiveTarget, now int64) (copyTarget, error) {
	ct := copyTarget{Job: t.Job, Item: t.Item, Path: t.Path}
	if !t.Job {
		var cands []ref.Candidate
		for _, c := range st.SortedContracts() {
			if c.Renter == person {
				cands = append(cands, ref.Candidate{ID: c.ID})
			}
		}
		id, err := ref.Resolve("contract", "cshare contract ls", t.Ref, cands)
		if err != nil {
			return ct, err
		}
		c := st.Contracts[id]
		switch state := c.State(now, st.MarketPolicy()); state {
		case market.StateRunning, market.StateStopped, market.StateExpired:
		default:
			return ct, api.Errorf(http.StatusConflict, "contract %s is %s: it has no container to copy to or from", id, state)
		}
		ct.ID, ct.Driver, ct.Machine = id, "docker", c.Offer.Machine
		return ct, checkCopyPath(ct)
	}
	var cands []ref.Candidate
	for _, j := range st.SortedJobs() {
		if st.CanSee(person, j) {
			cands = append(cands, ref.Candidate{ID: j.ID, Name: j.Spec.Name})
		}
	}
	id, err := ref.Resolve("job", "cshare job ls", t.Ref, cands)
	if err != nil {
		return ct, err
	}
	j := st.Jobs[id]
	switch {
	case j.State != ledger.JobActive:
		return ct, api.Errorf(http.StatusConflict, "job %s is %s: only a running item's container can be copied to or from", id, j.State)
	case t.Item < j.Spec.RangeStart || t.Item > j.Spec.RangeEnd:
		return ct, api.FieldErrorf(http.StatusBadRequest, "item", "item: job %s has no item %d; its items are %d..%d", id, t.Item, j.Spec.RangeStart, j.Spec.RangeEnd)
	case j.Items.Status(int(t.Item-j.Spec.RangeStart)) != ledger.ItemPending:
		return ct, api.Errorf(http.StatusConflict, "item %d of job %s has finished: only a running item's container can be copied to or from", t.Item, id)
	}
	ct.ID, ct.Driver = id, j.Spec.Driver
	return ct, checkCopyPath(ct)
}

// checkCopyPath: a container's path is absolute; an exec run's may be
// relative to its work dir.
func checkCopyPath(ct copyTarget) error {
	if ct.Driver == "docker" && !path.IsAbs(ct.Path) {
		return api.FieldErrorf(http.StatusBadRequest, "path", "path: %q is not absolute; allowed: a path in the container such as /root/data", api.Ellipsize(ct.Path))
	}
	return nil
}

// target resolves t for this machine's person, with the machine that
// runs it.
func (s *Service) copyTarget(t api.ArchiveTarget) (copyTarget, error) {
	if err := s.needOrg(); err != nil {
		return copyTarget{}, err
	}
	var ct copyTarget
	var err error
	s.d.Ledger.View(func(st *ledger.State) { ct, err = resolveCopy(st, s.d.Person(), t, s.d.Now().UnixMilli()) })
	if err != nil {
		return ct, err
	}
	if ct.Job {
		if ct.Machine = s.d.Machines.RunningOn(ct.ID, ct.Item); ct.Machine == "" {
			return ct, api.Errorf(http.StatusConflict, "item %d of job %s runs on no machine now", ct.Item, ct.ID)
		}
	}
	return ct, nil
}

// PutArchive unpacks the tar archive body into t.Path of t's container,
// on this machine or through the machine that runs it. t.Path is a
// directory to put the archive's top entry into, or a path that does not
// exist yet (or a file) whose directory exists: the top entry is then
// renamed to its last element, as cp does.
func (s *Service) PutArchive(ctx context.Context, t api.ArchiveTarget, body io.Reader) (api.ArchiveResult, error) {
	ct, err := s.copyTarget(t)
	if err != nil {
		return api.ArchiveResult{}, err
	}
	cr := &countingReader{r: body}
	if ct.Machine != s.d.Machine {
		err = s.remotePut(ctx, ct, cr)
	} else {
		err = s.putHere(ctx, ct, cr)
	}
	if err != nil {
		return api.ArchiveResult{}, err
	}
	return api.ArchiveResult{Path: ct.Path, Bytes: cr.n.Load()}, nil
}

// GetArchive is a tar archive of t.Path in t's container.
func (s *Service) GetArchive(ctx context.Context, t api.ArchiveTarget) (io.ReadCloser, error) {
	ct, err := s.copyTarget(t)
	if err != nil {
		return nil, err
	}
	if ct.Machine != s.d.Machine {
		return s.remoteGet(ctx, ct)
	}
	return s.getHere(ctx, ct)
}

// enterer is the driver and run of ct on this machine: a contract's
// container whether it runs or not, a job item's running run.
func (s *Service) enterer(ctx context.Context, ct copyTarget) (runtime.Enterer, runtime.RunID, error) {
	en, run, err := s.locateRun(ctx, ct.Driver, ct.Job, ct.ID, ct.Item, true)
	if err != nil {
		return nil, "", api.Errorf(http.StatusConflict, "%v", err)
	}
	return en, run, nil
}

// putHere unpacks body into ct.Path of its run on this machine.
func (s *Service) putHere(ctx context.Context, ct copyTarget, body io.Reader) error {
	en, run, err := s.enterer(ctx, ct)
	if err != nil {
		return err
	}
	dir := ct.Path
	if st, err := en.Stat(ctx, run, ct.Path); err != nil || !st.Dir {
		// Not a directory: the top entry becomes this path's last element,
		// in its directory.
		if err != nil && !errors.Is(err, runtime.ErrNotFound) {
			return err
		}
		dir = path.Dir(ct.Path)
		if dir == "." {
			dir = ""
		}
		rc := tarcopy.Rename(body, path.Base(ct.Path))
		defer rc.Close()
		body = rc
	}
	if err := en.CopyTo(ctx, run, dir, body); err != nil {
		if errors.Is(err, runtime.ErrNotFound) {
			return api.FieldErrorf(http.StatusNotFound, "path", "path: %s: no such directory in the container", api.Ellipsize(dir))
		}
		return err
	}
	s.d.Log.Info("copied into a container", "target", ct.ID, "item", ct.Item, "path", ct.Path)
	return nil
}

// getHere is a tar archive of ct.Path in its run on this machine.
func (s *Service) getHere(ctx context.Context, ct copyTarget) (io.ReadCloser, error) {
	en, run, err := s.enterer(ctx, ct)
	if err != nil {
		return nil, err
	}
	rc, _, err := en.CopyFrom(ctx, run, ct.Path)
	if err != nil {
		if errors.Is(err, runtime.ErrNotFound) {
			return nil, api.FieldErrorf(http.StatusNotFound, "path", "path: %s: no such file or directory in the container", api.Ellipsize(ct.Path))
		}
		return nil, err
	}
	s.d.Log.Info("copied out of a container", "target", ct.ID, "item", ct.Item, "path", ct.Path)
	return rc, nil
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

var errNoStreams = fmt.Errorf("this node cannot reach other machines' containers")
