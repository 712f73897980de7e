package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Dataset blocks of packMin bytes or more (file chunks) are appended to
// pack files in <dir>/packs (with O_DIRECT on Linux: no page cache copy;
// each block starts on a 4 KiB boundary), one writev per batch, and Badger
// keeps only where each is (key dk/<CID>, a 16-byte pointer). Writing them
// into Badger's value log instead went through its memory map, a page
// fault per 4 KiB, which made it the largest cost of an import and of a
// fetch. A pointer is written after its pack is synced (DataWriter.Flush:
// an import appends many batches, then syncs once), so a block the store
// acknowledged survives kill -9; bytes appended but not yet flushed are
// never pointed at. A pack file is deleted once no pointer refers to it
// and it is neither the one being appended to nor held (appended to by a
// writer that has not flushed yet); the space of a pack's dead blocks comes
// back only with the last of them.

const (
	packMin   = 4 << 10
	packLimit = 1 << 30 // a pack grows to about this, then the next starts
	ptrSize   = 16
)

var ptrPrefix = []byte("dk/")

func ptrKey(c []byte) []byte { return append(append([]byte(nil), ptrPrefix...), c...) }

// ptr is where a block lives: pack, offset, length.
type ptr struct {
	pack uint32
	off  uint64
	n    uint32
}

func (p ptr) encode() []byte {
	b := make([]byte, ptrSize)
	binary.BigEndian.PutUint32(b, p.pack)
	binary.BigEndian.PutUint64(b[4:], p.off)
	binary.BigEndian.PutUint32(b[12:], p.n)
	return b
}

func decodePtr(b []byte) (ptr, error) {
	if len(b) != ptrSize {
		return ptr{}, fmt.Errorf("store: block pointer of %d bytes; want %d", len(b), ptrSize)
	}
	return ptr{binary.BigEndian.Uint32(b), binary.BigEndian.Uint64(b[4:]), binary.BigEndian.Uint32(b[12:])}, nil
}

type packs struct {
	dir string

	// gc is held shared by a put from its append until its pointers are
	// written, and exclusively while dead packs are found and deleted, so
	// a pack is never deleted under pointers about to be written.
	gc sync.RWMutex

	mu      sync.Mutex // appends, syncs, the current pack, holds, deletions
	cur     *os.File
	direct  bool // cur was opened with O_DIRECT
	dirty   bool // cur has appends not synced yet
	curID   uint32
	curSize int64
	next    uint32
	// held counts, per pack, the appends whose pointers are not written
	// yet.
	held map[uint32]int
	// ahead counts the syncs of the current pack running without mu
	// (syncAhead); sync and leave wait for them, so a pack is not closed
	// under one and its failure is seen.
	ahead sync.WaitGroup

	bmu sync.Mutex
	bad map[uint32]error // packs with appends that could not be synced

	rmu     sync.Mutex
	readers map[uint32]*os.File
}

func openPacks(dir string) (*packs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: packs: %w", err)
	}
	ids, err := packIDs(dir)
	if err != nil {
		return nil, err
	}
	p := &packs{dir: dir, readers: map[uint32]*os.File{}, next: 1, held: map[uint32]int{}, bad: map[uint32]error{}}
	for _, id := range ids {
		p.next = max(p.next, id+1)
	}
	return p, nil
}

func packIDs(dir string) ([]uint32, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: packs: %w", err)
	}
	var out []uint32
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".pack")
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(name, 10, 32)
		if err != nil {
			continue
		}
		out = append(out, uint32(id))
	}
	return out, nil
}

func (p *packs) path(id uint32) string {
	return filepath.Join(p.dir, fmt.Sprintf("%08d.pack", id))
}

// append writes bs to the current pack and returns where each block is.
// The pack is held until release(ptrs' pack); the bytes are durable once
// sync of it returned.
func (p *packs) append(bs []Block) ([]ptr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil || p.curSize >= packLimit || p.failed(p.curID) != nil {
		if err := p.rotate(); err != nil {
			return nil, err
		}
	}
	out := make([]ptr, len(bs))
	bufs := make([][]byte, len(bs))
	// O_DIRECT takes whole aligned pages from aligned memory: blocks not
	// so are copied, zero padded, into one aligned buffer.
	var pad int
	for _, b := range bs {
		if p.direct && !aligned(b.Data) {
			pad += padded(len(b.Data))
		}
	}
	var bounce []byte
	if pad > 0 {
		bounce = alignedBuf(pad)
	}
	off := p.curSize
	for i, b := range bs {
		data := b.Data
		if p.direct && !aligned(data) {
			n := padded(len(data))
			data, bounce = bounce[:n:n], bounce[n:]
			clear(data[copy(data, b.Data):])
		}
		bufs[i] = data
		out[i] = ptr{pack: p.curID, off: uint64(off), n: uint32(len(b.Data))}
		off += int64(len(data))
	}
	if err := writeBufs(p.cur, bufs); err != nil {
		p.abandon()
		return nil, fmt.Errorf("store: pack write: %w", err)
	}
	p.curSize = off
	p.dirty = true
	p.held[p.curID]++
	return out, nil
}

// sync makes the appends to the packs ids durable (it syncs the current
// pack if it is one of them; the others were synced when left).
func (p *packs) sync(ids []uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ahead.Wait()
	for _, id := range ids {
		if err := p.failed(id); err != nil {
			return fmt.Errorf("store: pack %d sync: %w", id, err)
		}
		if p.cur != nil && id == p.curID && p.dirty {
			if err := syncData(p.cur); err != nil {
				// Not retried: a second sync may pass with the bytes lost.
				p.setBad(id, err)
				p.dirty = false
				p.abandon()
				return fmt.Errorf("store: pack %d sync: %w", id, err)
			}
			p.dirty = false
		}
	}
	return nil
}

// syncAhead syncs pack id, if it is still the current one, without holding
// appends up: the sync that makes them durable then has less to wait for
// (a virtio disk wrote its cache out only when told). A failure is kept
// for that sync to report.
func (p *packs) syncAhead(id uint32) {
	p.mu.Lock()
	f := p.cur
	if f == nil || p.curID != id || !p.dirty {
		p.mu.Unlock()
		return
	}
	p.ahead.Add(1)
	p.mu.Unlock()
	defer p.ahead.Done()
	if err := syncData(f); err != nil {
		p.setBad(id, err)
	}
}

func (p *packs) setBad(id uint32, err error) {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	if p.bad[id] == nil {
		p.bad[id] = err
	}
}

func (p *packs) failed(id uint32) error {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	return p.bad[id]
}

// release ends one hold of each of the packs ids (an id once per append).
func (p *packs) release(ids []uint32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		if p.held[id]--; p.held[id] <= 0 {
			delete(p.held, id)
		}
	}
}

const pageSize = 4096

// padded is n rounded up to whole pages.
func padded(n int) int { return (n + pageSize - 1) / pageSize * pageSize }

// aligned reports whether b can be written with O_DIRECT as it is: whole
// pages from a page-aligned address (as Go allocates large slices).
func aligned(b []byte) bool {
	return len(b) > 0 && len(b)%pageSize == 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%pageSize == 0
}

// alignedBuf is n bytes of page-aligned memory.
func alignedBuf(n int) []byte {
	b := make([]byte, n+pageSize)
	k := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % pageSize)
	if k != 0 {
		k = pageSize - k
	}
	return b[k : k+n : k+n]
}

// abandon stops appending to the current pack after a failed write or
// sync (its size is no longer known); the next append starts a new one.
func (p *packs) abandon() {
	p.leave()
}

// leave syncs the current pack's appends (or records why they cannot be),
// closes it, and leaves no current pack.
func (p *packs) leave() {
	if p.cur == nil {
		return
	}
	p.ahead.Wait()
	if p.dirty {
		if err := syncData(p.cur); err != nil {
			p.setBad(p.curID, err)
		}
	}
	_ = p.cur.Close()
	p.cur, p.dirty = nil, false
}

func (p *packs) rotate() error {
	p.leave()
	id := p.next
	flags := os.O_CREATE | os.O_EXCL | os.O_WRONLY | os.O_APPEND
	f, err := os.OpenFile(p.path(id), flags|directIO, 0o600)
	p.direct = err == nil && directIO != 0
	if err != nil && directIO != 0 { // a file system without O_DIRECT
		_ = os.Remove(p.path(id))
		f, err = os.OpenFile(p.path(id), flags, 0o600)
	}
	if err != nil {
		return fmt.Errorf("store: new pack: %w", err)
	}
	if d, err := os.Open(p.dir); err == nil { // the new name, durably
		_ = d.Sync()
		d.Close()
	}
	p.next++
	p.cur, p.curID, p.curSize = f, id, 0
	return nil
}

// read returns a block's bytes, in buf's memory when they fit.
func (p *packs) read(at ptr, buf []byte) ([]byte, error) {
	f, err := p.reader(at.pack)
	if err != nil {
		return nil, err
	}
	out := buf[:0]
	if cap(out) < int(at.n) {
		out = make([]byte, at.n)
	}
	out = out[:at.n]
	if _, err := f.ReadAt(out, int64(at.off)); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("store: pack %d read: %w", at.pack, err)
	}
	return out, nil
}

func (p *packs) reader(id uint32) (*os.File, error) {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	if f := p.readers[id]; f != nil {
		return f, nil
	}
	f, err := os.Open(p.path(id))
	if err != nil {
		return nil, fmt.Errorf("store: pack %d: %w", id, err)
	}
	p.readers[id] = f
	return f, nil
}

// drop deletes the packs not in live, except the one being appended to.
func (p *packs) drop(live map[uint32]bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids, err := packIDs(p.dir)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if live[id] || p.held[id] > 0 || (p.cur != nil && id == p.curID) {
			continue
		}
		p.rmu.Lock()
		if f := p.readers[id]; f != nil {
			f.Close()
			delete(p.readers, id)
		}
		p.rmu.Unlock()
		if err := os.Remove(p.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("store: pack delete: %w", err)
		}
		p.bmu.Lock()
		delete(p.bad, id)
		p.bmu.Unlock()
	}
	return nil
}

func (p *packs) close() {
	p.mu.Lock()
	p.leave()
	p.mu.Unlock()
	p.rmu.Lock()
	for id, f := range p.readers {
		f.Close()
		delete(p.readers, id)
	}
	p.rmu.Unlock()
}
