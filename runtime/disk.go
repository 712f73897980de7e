package runtime

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
)

// DiskUser is a driver that can tell how much disk a run has written: its
// container's writable layer (docker) or its work directory (exec). The
// node stops a run that writes more than its job's --disk.
type DiskUser interface {
	DiskUsage(ctx context.Context, id RunID) (int64, error)
}

var (
	_ DiskUser = (*Docker)(nil)
	_ DiskUser = (*Exec)(nil)
	_ DiskUser = (*Fake)(nil)
)

// DiskUsage is the size of the container's writable layer.
func (d *Docker) DiskUsage(ctx context.Context, id RunID) (int64, error) {
	info, _, err := d.cli.ContainerInspectWithRaw(ctx, string(id), true)
	if err != nil {
		if isNotFound(err) {
			return 0, notFound(id)
		}
		return 0, fmt.Errorf("runtime: size of container %s: %w", idShort(id), err)
	}
	if info.SizeRw == nil {
		return 0, nil
	}
	return *info.SizeRw, nil
}

// DiskUsage is the size of the run's work directory (its instance's:
// runs of one instance share it). Mounts are symlinks there and are not
// followed.
func (e *Exec) DiskUsage(ctx context.Context, id RunID) (int64, error) {
	st, err := e.loadState(id)
	if err != nil {
		return 0, err
	}
	return DirSize(ctx, st.WorkDir), nil
}

// DiskUsage is what SetDiskUsage set for the run, 0 by default.
func (f *Fake) DiskUsage(ctx context.Context, id RunID) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.runs[id]; !ok {
		return 0, notFound(id)
	}
	return f.disk[id], nil
}

// SetDiskUsage makes DiskUsage of run id report n bytes.
func (f *Fake) SetDiskUsage(id RunID, n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.disk == nil {
		f.disk = map[RunID]int64{}
	}
	f.disk[id] = n
}

// DirSize is the bytes of the regular files under dir, symlinks not
// followed; what cannot be read counts 0. It stops early when ctx ends.
func DirSize(ctx context.Context, dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
