package node

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cshare/cshare/internal/diskguard"
)

// A full disk degrades the node; it does not kill it. The node keeps a
// reserve on its data dir's filesystem (node.yaml's disk.reserve, see
// package internal/diskguard): below it, every write of the store is
// refused with one line ("disk full: N MiB free in DIR, cshare keeps M
// MiB"), no new item starts, the heartbeat says so (machine ls shows "disk
// full"), and reads and running items go on. Finished items' results stay
// in memory (s.results) and their output in disk.held, and are written
// once there is room again: the guard's poll resumes by itself.

// diskState is the node's side of its disk guard.
type diskState struct {
	g       *diskguard.Guard // nil: no guard (the node's store is not open yet)
	flipped atomic.Bool      // the guard turned full or back: the scheduler tells the org (package sched)
	refused atomic.Int64     // item starts refused for a full disk

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
	g, err := diskguard.Open(n.opts.DataDir, diskguard.Options{Reserve: mb * diskguard.MiB, Ballast: mb * diskguard.MiB, Log: n.log,
		OnChange: n.diskChanged})
	if err != nil {
		return err
	}
	n.disk.g = g
	n.spawn(func() { g.Run(n.ctx, min(time.Second, n.interval)) })
	return nil
}

// diskChanged is the guard's OnChange: it may be called from inside a
// store write, under any of the node's locks, so it only signals.
func (n *Node) diskChanged() {
	n.disk.flipped.Store(true)
	n.kickScheduler()
}

// mayStartItem reports whether an instance may take a new item: not while
// the disk is full.
func (n *Node) mayStartItem() bool {
	if n.disk.g.Check(0) != nil {
		n.disk.refused.Add(1)
		return false
	}
	return true
}

// saveLog keeps an item's output (see logs.Store.Save), in memory while
// the disk is full.
func (n *Node) saveLog(job string, item int64, out []byte) {
	if n.disk.g.Check(int64(len(out))) != nil {
		n.disk.mu.Lock()
		n.disk.held = append(n.disk.held, heldLog{job, item, out})
		n.disk.mu.Unlock()
		return
	}
	_ = n.logs.Save(job, item, out)
}

// saveHeldLogs writes the output held while the disk was full, as long as
// there is room.
func (n *Node) saveHeldLogs() {
	for {
		n.disk.mu.Lock()
		if len(n.disk.held) == 0 {
			n.disk.mu.Unlock()
			return
		}
		h := n.disk.held[0]
		if n.disk.g.Check(int64(len(h.out))) != nil {
			n.disk.mu.Unlock()
			return
		}
		n.disk.held = n.disk.held[1:]
		n.disk.mu.Unlock()
		if err := n.logs.Save(h.job, h.item, h.out); err != nil {
			n.log.Warn("could not keep an item's output", "job", h.job, "item", h.item, "err", err)
		}
	}
}
