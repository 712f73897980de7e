package orgsvc

// What leaving an org does to this machine's runs and data (see leave.go).

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/cshare/cshare/runtime"
)

// removeRuns stops and removes every run of org on this machine, whatever
// its job's state: the node is leaving the org. It runs after Close, so
// nothing supervises them any more.
func (l *Leaving) removeRuns(org string) {
	if org == "" {
		return
	}
	l.s.d.Runs.EachDriver(func(drv runtime.Driver) {
		ctx, c := context.WithTimeout(context.Background(), time.Minute)
		defer c()
		runs, err := drv.List(ctx, map[string]string{runtime.LabelOrg: org, runtime.LabelMachine: l.s.idStr})
		if err != nil {
			l.s.d.Log.Warn("leaving the org: could not list its runs", "driver", drv.Name(), "err", err)
			return
		}
		for _, r := range runs {
			_ = drv.Stop(ctx, r.ID, 0)
			if err := drv.Remove(ctx, r.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
				l.s.d.Log.Warn("leaving the org: could not remove a run", "driver", drv.Name(), "run", string(r.ID), "err", err)
			}
		}
	})
}

// RemoveForeignRuns stops and removes every run and contract instance of
// this machine that is labelled for an org other than the one the node is
// in (every one, in no org): the node left that org while they ran, or was
// down when it did (issue 27: a rental outlived its org). The node's Start runs it,
// so it runs after every exit too. A run is looked at again just before it
// goes, so one of an org the node has just joined stays.
func (l *Leaving) RemoveForeignRuns() {
	ctx, cancel := context.WithTimeout(l.s.ctx, time.Minute)
	defer cancel()
	foreign := func(org string) bool { return org != l.s.orgID() }
	if !l.s.d.Runs.EachDriver(func(drv runtime.Driver) {
		runs, err := drv.List(ctx, map[string]string{runtime.LabelMachine: l.s.idStr})
		if err != nil {
			l.s.d.Log.Debug("could not list this machine's runs", "driver", drv.Name(), "err", err)
			return
		}
		for _, r := range runs {
			if org := r.Labels[runtime.LabelOrg]; foreign(org) {
				_ = drv.Stop(ctx, r.ID, 0)
				if err := drv.Remove(ctx, r.ID); err != nil && !errors.Is(err, runtime.ErrNotFound) {
					l.s.d.Log.Warn("could not remove a run of an org this machine is not in", "driver", drv.Name(), "org", org, "run", string(r.ID), "err", err)
					continue
				}
				l.s.d.Log.Info("removed a run of an org this machine is not in", "org", org, "run", string(r.ID))
			}
		}
	}) {
		return
	}
	l.s.d.Runs.RemoveForeignContracts(ctx, foreign)
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
