package store

import (
	"encoding/binary"
	"fmt"
	"strings"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/ipfs/go-cid"
)

// DataWriter stores dataset blocks in two steps: Put writes them (the big
// ones to a pack, without waiting for the disk) and Flush makes every block
// put before it durable and findable: it syncs the packs they went to and
// only then writes their pointers, the small blocks and the pins in one
// synced Badger write. An import puts batch after batch and flushes
// rarely, which costs one sync of each kind where a synced write per batch
// kept the disk waiting on syncs. A block put but not flushed when the
// process dies is not stored (its pack bytes are never pointed at), and
// one put but not flushed is not found. A DataWriter is used by one
// goroutine at a time; after an error it stores nothing more; Close ends
// it.
type DataWriter struct {
	s     *Store
	pin   *Pin
	seen  map[string]bool // CIDs put since the last flush
	big   []pointed
	small []Block // copies
	pins  []cid.Cid
	held  []uint32 // a pack once per append of this writer's not flushed
	size  int64
	puts  int           // Puts since the last flush
	ahead int64         // bytes put since a sync ahead last started
	sync  chan struct{} // closed when the last sync ahead ended
	err   error         // a failed Put's or Flush's: it stores nothing more
}

// syncAheadEvery is the bytes put between syncs of the pack started in the
// background (packs.syncAhead), from a writer's second Put since its last
// flush on (a PutDataBlocks does not start one).
const syncAheadEvery = 32 << 20

type pointed struct {
	c  cid.Cid
	at ptr
}

// NewDataWriter returns a writer of dataset blocks; with pin, every block
// put (stored before or not) is pinned (Pin) in the same Badger write as
// the pointers.
func (s *Store) NewDataWriter(pin *Pin) (*DataWriter, error) {
	if pin != nil && (pin.ID == "" || len(pin.ID) > 64 || strings.Contains(pin.ID, "/")) {
		return nil, fmt.Errorf("store: data put: pin ID %q; allowed: 1 to 64 bytes without /", pin.ID)
	}
	return &DataWriter{s: s, pin: pin, seen: map[string]bool{}}, nil
}

// Put writes the blocks of bs not stored yet (nor put since the last
// Flush) and returns how many it wrote. It keeps no reference to bs's
// memory once it returns.
func (w *DataWriter) Put(bs []Block) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	var fresh []Block
	err := w.s.db.View(func(txn *badger.Txn) error {
		for _, b := range bs {
			k := string(b.CID.Bytes())
			if w.seen[k] {
				continue
			}
			w.seen[k] = true
			if w.pin != nil {
				w.pins = append(w.pins, b.CID)
			}
			has, err := hasData(txn, b.CID.Bytes())
			if err != nil {
				return err
			}
			if !has {
				fresh = append(fresh, b)
			}
		}
		return nil
	})
	if err != nil {
		w.err = fmt.Errorf("store: data put: %w", err)
		return 0, w.err
	}
	var big []Block
	for _, b := range fresh {
		if len(b.Data) >= packMin {
			big = append(big, b)
		} else {
			w.small = append(w.small, Block{CID: b.CID, Data: append([]byte{}, b.Data...)})
		}
		w.size += int64(len(b.Data))
	}
	if len(big) > 0 {
		need := int64(0)
		for _, b := range big {
			need += int64(len(b.Data))
		}
		if err := w.s.mayWrite(need); err != nil {
			w.err = err
			return 0, err
		}
		ptrs, err := w.s.packs.append(big)
		if err != nil {
			w.err = err
			return 0, err
		}
		w.held = append(w.held, ptrs[0].pack)
		for i, b := range big {
			w.big = append(w.big, pointed{b.CID, ptrs[i]})
			w.ahead += int64(len(b.Data))
		}
		if w.puts++; w.puts > 1 && w.ahead >= syncAheadEvery && w.syncDone() {
			w.ahead = 0
			w.sync = make(chan struct{})
			go func(id uint32, done chan struct{}) {
				defer close(done)
				w.s.packs.syncAhead(id)
			}(ptrs[0].pack, w.sync)
		}
	}
	return len(fresh), nil
}

// syncDone reports whether no sync ahead of the writer's runs.
func (w *DataWriter) syncDone() bool {
	if w.sync == nil {
		return true
	}
	select {
	case <-w.sync:
		return true
	default:
		return false
	}
}

// Unflushed is the bytes of blocks put since the last Flush.
func (w *DataWriter) Unflushed() int64 { return w.size }

// Flush makes the blocks put so far durable and findable.
func (w *DataWriter) Flush() error {
	if w.err != nil {
		return w.err
	}
	if len(w.big) == 0 && len(w.small) == 0 && len(w.pins) == 0 {
		return nil
	}
	if err := w.flush(); err != nil {
		w.err = err
		return err
	}
	w.s.packs.release(w.held)
	clear(w.seen)
	w.big, w.small, w.pins, w.held, w.size = w.big[:0], nil, w.pins[:0], w.held[:0], 0
	w.puts, w.ahead = 0, 0
	return nil
}

func (w *DataWriter) flush() error {
	need := int64(len(w.pins)+len(w.big)) * 64
	for _, b := range w.small {
		need += int64(len(b.Data)) + 64
	}
	if err := w.s.mayWrite(need); err != nil {
		return err
	}
	if err := w.s.packs.sync(w.held); err != nil {
		return err
	}
	// Held shared while pointers are written: packs are dropped either
	// before (this writer's holds kept them) or after (the pointers do).
	w.s.packs.gc.RLock()
	defer w.s.packs.gc.RUnlock()
	wb := w.s.db.NewWriteBatch()
	defer wb.Cancel()
	if w.pin != nil {
		var at [8]byte
		binary.BigEndian.PutUint64(at[:], uint64(w.pin.At.Unix()))
		for _, c := range w.pins {
			if err := wb.Set(pinKey(w.pin.ID, c), at[:]); err != nil {
				return fmt.Errorf("store: data put: %w", err)
			}
		}
	}
	for _, b := range w.small {
		if err := wb.Set(dataKey(b.CID), b.Data); err != nil {
			return fmt.Errorf("store: data put: %w", err)
		}
	}
	for _, b := range w.big {
		if err := wb.Set(ptrKey(b.c.Bytes()), b.at.encode()); err != nil {
			return fmt.Errorf("store: data put: %w", err)
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("store: data put: %w", err)
	}
	return nil
}

// Close ends the writer: blocks put and not flushed are not stored.
func (w *DataWriter) Close() {
	if w.sync != nil {
		<-w.sync
	}
	w.s.packs.release(w.held)
	w.held = nil
	if w.err == nil {
		w.err = fmt.Errorf("store: data put: writer closed")
	}
}
