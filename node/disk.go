package node

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cshare/cshare/internal/diskguard"
	"github.com/cshare/cshare/node/logs"
)

// A full disk degrades the node; it does not kill it. The node keeps a
// reserve on its data dir's filesystem (node.yaml's disk.reserve, see
// package internal/diskguard): below it, every write of the store is
// refused with one line ("disk full: N MiB free in DIR, cshare keeps M
// MiB"), no new item starts, the heartbeat says so (machine ls shows "disk
// full"), and reads and running items go on. Finished items' results stay
// in memory (s.results) and their output in disk.held, and are written
// once there is room again: the guard's poll resumes by itself.

// diskState is the node's side of its disk guard, as the scheduler uses
// it (sched.Disk).
type diskState struct {
	g       *diskguard.Guard // nil: no guard (the node's store is not open yet)
	logs    *logs.Store      // where item output goes when there is room
	spawn   func(fn func())
	log     *slog.Logger
	flipped atomic.Bool  // the guard turned full or back: the scheduler tells the org (package sched)
	refused atomic.Int64 // item starts refused for a full disk

	mu   sync.Mutex
	held []heldLog // item output waiting for room
}

// heldLog is an item's output kept in memory while the disk is full.
type heldLog struct {
	job  string
	item int64
	out  []byte
}

// openDisk starts guarding the data dir's filesystem: before the store is
// opened, so that a node started on a full disk gives its ballast back
// before Badger writes anything.
func (n *Node) openDisk() error {
	mb, err := n.cfg.DiskReserveMB(n.hw)
	if err != nil {
		return err
	}
	d := &n.disk
	d.logs, d.spawn, d.log = n.logs, n.spawn, n.log
	// OnChange may be called from inside a store write, under any of the
	// node's locks, so it only signals.
	g, err := diskguard.Open(n.opts.DataDir, diskguard.Options{Reserve: mb * diskguard.MiB, Ballast: mb * diskguard.MiB, Log: n.log,
		OnChange: func() {
			d.flipped.Store(true)
			n.kickScheduler()
		}})
	if err != nil {
		return err
	}
	d.g = g
	n.spawn(func() { g.Run(n.ctx, min(time.Second, n.interval)) })
	return nil
}

// Flipped reports, once, that the guard turned full or back.
func (d *diskState) Flipped() bool { return d.flipped.Swap(false) }

// MayStartItem reports whether an instance may take a new item: not while
// the disk is full.
func (d *diskState) MayStartItem() bool {
	if d.g.Check(0) != nil {
		d.refused.Add(1)
		return false
	}
	return true
}

// SaveLog keeps an item's output (see logs.Store.Save), in memory while
// the disk is full.
func (d *diskState) SaveLog(job string, item int64, out []byte) {
	if d.g.Check(int64(len(out))) != nil {
		d.mu.Lock()
		d.held = append(d.held, heldLog{job, item, out})
		d.mu.Unlock()
		return
	}
	_ = d.logs.Save(job, item, out)
}

// Resume writes the output held back while the disk was full, once there
// is room.
func (d *diskState) Resume() {
	if !d.g.Full() {
		d.spawn(d.saveHeld)
	}
}

// saveHeld writes the output held while the disk was full, as long as
// there is room.
func (d *diskState) saveHeld() {
	for {
		d.mu.Lock()
		if len(d.held) == 0 {
			d.mu.Unlock()
			return
		}
		h := d.held[0]
		if d.g.Check(int64(len(h.out))) != nil {
			d.mu.Unlock()
			return
		}
		d.held = d.held[1:]
		d.mu.Unlock()
		if err := d.logs.Save(h.job, h.item, h.out); err != nil {
			d.log.Warn("could not keep an item's output", "job", h.job, "item", h.item, "err", err)
		}
	}
}
