// Package diskguard keeps a reserve of free space on the filesystem of a
// node's data dir, so that a full disk degrades the node instead of killing
// it.
//
// Badger writes its memtable and value log through memory-mapped files
// that it creates sparse (dgraph-io/badger#1682, #1801): when the
// filesystem has no free block left, the next write into such a file is a
// SIGBUS, which no Go code can recover from. The guard avoids ever getting
// there:
//
//   - Check runs before every write of the store and every item start. It
//     reads the free space (statfs) and refuses, with a *FullError ("disk
//     full: N MiB free in DIR, cshare keeps M MiB"), when less than the
//     reserve would be left. The first refusal turns the guard full.
//   - A ballast file (DIR/ballast, as large as the reserve by default) is
//     held while there is room. Turning full gives it back at once, so that
//     whatever is already under way (Badger's flushes and its close, an
//     item's exit file, a write that raced the check) finds free blocks
//     even after something else filled the disk to the last byte.
//   - Poll, run every second or so by the node, ends the full state once
//     the free space is back above the reserve with a margin, and only
//     after the ballast is back in place.
//
// Free space is counted as if the ballast were always there: a released
// ballast is still owed, so releasing it never ends the full state, and
// the node resumes only when the ballast and the reserve both fit again.
package diskguard

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// MiB is a mebibyte: the unit of the guard's messages.
const MiB = 1 << 20

// BallastName is the ballast file's name in the guarded directory.
const BallastName = "ballast"

// ErrFull is what every *FullError is (errors.Is).
var ErrFull = errors.New("disk full")

// FullError is the refusal of a write or an item start: one line naming the
// free space, the directory and the reserve.
type FullError struct {
	Dir        string
	FreeMiB    int64 // free space, the ballast counted as used
	ReserveMiB int64
}

func (e *FullError) Error() string {
	return fmt.Sprintf("disk full: %d MiB free in %s, cshare keeps %d MiB", e.FreeMiB, e.Dir, e.ReserveMiB)
}

// Is makes errors.Is(err, ErrFull) true.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// StatFunc returns the bytes available on the filesystem holding dir.
type StatFunc func(dir string) (int64, error)

// Options configure a Guard.
type Options struct {
	// Reserve is the free space, in bytes, below which writes are refused.
	// 0 turns the guard off: it refuses nothing and holds no ballast.
	Reserve int64
	// Ballast is the size of the ballast file in bytes (0: none).
	Ballast int64
	// Stat reads the free space (default: statfs, the space available to
	// an unprivileged user).
	Stat StatFunc
	// OnChange is called, outside the guard's lock, after the guard turned
	// full or back. It must not block, nor wait for anything that may hold
	// a lock around a Check: Check calls it from the write that turned the
	// guard full. Read Full for the state.
	OnChange func()
	// Log gets a line on each change (default: discard).
	Log *slog.Logger
}

// Guard guards one directory. Its methods are safe for concurrent use; a
// nil *Guard refuses nothing.
type Guard struct {
	dir     string
	path    string // the ballast file
	reserve int64
	ballast int64
	stat    StatFunc
	change  func()
	log     *slog.Logger

	mu   sync.Mutex
	full bool
	held int64 // bytes of ballast on disk
	free int64 // at the last reading, the ballast counted as used
}

// Open starts guarding dir: it reads the free space, takes the ballast
// when there is room for it (keeping one already there), and starts full
// when there is not. An error means the ballast's file could not be read
// or made.
func Open(dir string, o Options) (*Guard, error) {
	if o.Reserve < 0 || o.Ballast < 0 {
		return nil, fmt.Errorf("diskguard: reserve %d and ballast %d must not be negative", o.Reserve, o.Ballast)
	}
	g := &Guard{dir: dir, path: filepath.Join(dir, BallastName), reserve: o.Reserve, ballast: o.Ballast,
		stat: o.Stat, change: o.OnChange, log: o.Log}
	if g.stat == nil {
		g.stat = statfs
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.reserve == 0 {
		g.ballast = 0
		if err := os.Remove(g.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("diskguard: %w", err)
		}
		return g, nil
	}
	held, err := onDisk(g.path)
	if err != nil {
		return nil, fmt.Errorf("diskguard: %w", err)
	}
	if held > g.ballast {
		// A larger reserve before: give back what is too much.
		if err := os.Truncate(g.path, g.ballast); err != nil {
			return nil, fmt.Errorf("diskguard: %w", err)
		}
		if held, err = onDisk(g.path); err != nil {
			return nil, fmt.Errorf("diskguard: %w", err)
		}
	}
	g.held = held
	g.Poll()
	return g, nil
}

// onDisk is the bytes a file takes on disk (0 when it is absent).
func onDisk(path string) (int64, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return allocated(fi), nil
}

// Full reports whether the guard refuses writes and item starts.
func (g *Guard) Full() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.full
}

func (g *Guard) errLocked() *FullError {
	return &FullError{Dir: g.dir, FreeMiB: max(g.free, 0) / MiB, ReserveMiB: g.reserve / MiB}
}

// Check reads the free space and says whether a write of need bytes may go
// ahead: nil, or a *FullError when the guard is full or the write would
// leave less than the reserve. Less than the reserve free turns the guard
// full (it releases the ballast at once); only Poll turns it back. A free
// space that cannot be read refuses nothing more than the full state does.
func (g *Guard) Check(need int64) error {
	if g == nil || g.reserve == 0 {
		return nil
	}
	g.mu.Lock()
	changed, ok := g.readLocked()
	var err error
	if g.full || ok && g.free-max(need, 0) < g.reserve {
		err = g.errLocked()
	}
	g.mu.Unlock()
	if changed {
		g.changed()
	}
	return err
}

// readLocked reads the free space, turns the guard full when it is below
// the reserve, and reports whether it did and whether the space could be
// read. g.mu must be held.
func (g *Guard) readLocked() (changed, ok bool) {
	avail, err := g.stat(g.dir)
	if err != nil {
		return false, false
	}
	g.free = avail - (g.ballast - g.held)
	if g.full || g.free >= g.reserve {
		return false, true
	}
	g.full = true
	g.releaseLocked()
	g.log.Warn(g.errLocked().Error() + "; writes and new items are refused until there is room again")
	return true, true
}

// releaseLocked gives the ballast back. g.mu must be held.
func (g *Guard) releaseLocked() {
	if g.held == 0 {
		return
	}
	if err := os.Remove(g.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		g.log.Error("disk full, and the ballast could not be given back", "path", g.path, "err", err)
		return
	}
	g.held = 0
}

// resumeMargin is how far above the reserve the free space must be for a
// full guard to resume: an eighth of the reserve, at least 1 MiB, so that
// a disk hovering at the reserve does not make the node flap.
func (g *Guard) resumeMargin() int64 { return max(g.reserve/8, MiB) }

// Poll reads the free space again: it turns the guard full as Check does,
// puts back a ballast that is missing when there is room for it, and ends
// the full state once the free space is back above the reserve (with a
// margin) and the ballast is in place.
func (g *Guard) Poll() {
	if g == nil || g.reserve == 0 {
		return
	}
	g.mu.Lock()
	// A ballast someone removed is missing: count what is really there.
	if held, err := onDisk(g.path); err == nil {
		g.held = held
	}
	changed, ok := g.readLocked()
	switch {
	case changed || !ok:
	case g.full && g.free >= g.reserve+g.resumeMargin():
		if g.restoreLocked() {
			g.full, changed = false, true
			g.log.Info("disk space is back: writes and new items resume", "dir", g.dir, "free_mib", g.free/MiB)
		}
	case !g.full && g.held < g.ballast:
		g.restoreLocked()
	}
	g.mu.Unlock()
	if changed {
		g.changed()
	}
}

// restoreLocked makes the ballast whole, and reports whether it is. A
// ballast that cannot be made whole is removed. g.mu must be held.
func (g *Guard) restoreLocked() bool {
	if g.held >= g.ballast {
		return true
	}
	err := fill(g.path, g.ballast)
	if err == nil {
		var held int64
		if held, err = onDisk(g.path); err == nil && held < g.ballast {
			err = fmt.Errorf("%d of %d bytes allocated", held, g.ballast)
		}
		g.held = held
	}
	if err != nil {
		g.log.Warn("could not make the disk ballast", "path", g.path, "err", err)
		_ = os.Remove(g.path)
		g.held = 0
		return false
	}
	return true
}

func (g *Guard) changed() {
	if g.change != nil {
		g.change()
	}
}

// Run polls every period until ctx ends.
func (g *Guard) Run(ctx context.Context, every time.Duration) {
	if g == nil || g.reserve == 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			g.Poll()
		}
	}
}
