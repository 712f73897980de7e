package dataset

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/cshare/cshare/ledger/store"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// BlocksProtocol streams many blocks in one exchange, for bulk fetches where
// bitswap's want/have round trips are slow. A request is a varint count and
// that many varint-length-prefixed CIDs (the asker then closes its side);
// the answer is, for each CID in order, a status byte (1: the block
// follows, 0: not served) and, for 1, a varint length and the block's bytes.
const BlocksProtocol = "/cshare/dataset-blocks/1.0.0"

const (
	maxBlocksPerRequest = 1024
	maxBlockSize        = 2 << 20 // bitswap's limit too
)

// DecodeBlocksRequest reads a blocks request.
func DecodeBlocksRequest(r io.ByteReader) ([]cid.Cid, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("dataset: blocks request: %w", err)
	}
	if n == 0 || n > maxBlocksPerRequest {
		return nil, fmt.Errorf("dataset: blocks request of %d CIDs; allowed: 1 to %d", n, maxBlocksPerRequest)
	}
	out := make([]cid.Cid, 0, n)
	buf := make([]byte, maxCIDBytes)
	for range n {
		k, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, fmt.Errorf("dataset: blocks request: %w", err)
		}
		if k == 0 || k > maxCIDBytes {
			return nil, fmt.Errorf("dataset: blocks request: a CID of %d bytes; allowed: 1 to %d", k, maxCIDBytes)
		}
		for i := range buf[:k] {
			if buf[i], err = r.ReadByte(); err != nil {
				return nil, fmt.Errorf("dataset: blocks request: %w", err)
			}
		}
		c, err := DecodeHaveRequest(buf[:k])
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// ServeBlocks answers blocks requests on h from bs, sending a block only
// when allow says so.
func ServeBlocks(h host.Host, bs *Blockstore, allow Allow) {
	h.SetStreamHandler(BlocksProtocol, func(s network.Stream) {
		defer s.Close()
		_ = s.SetReadDeadline(time.Now().Add(30 * time.Second))
		cs, err := DecodeBlocksRequest(bufio.NewReader(io.LimitReader(s, maxBlocksPerRequest*(maxCIDBytes+2)+10)))
		if err != nil {
			_ = s.Reset()
			return
		}
		_ = s.SetReadDeadline(time.Time{})
		// Small writes (status, length) are buffered; a block's bytes are
		// read into one buffer for the stream and written from there. (The
		// store's own memory is not lent to the network: a slow reader
		// would hold the value log's lock.)
		w := bufio.NewWriterSize(s, 64<<10)
		var hdr [binary.MaxVarintLen64 + 1]byte
		var buf []byte
		p := s.Conn().RemotePeer()
		for _, c := range cs {
			_ = s.SetWriteDeadline(time.Now().Add(30 * time.Second))
			var data []byte
			found := false
			if allow(p, c) {
				var err error
				data, err = bs.s.DataBlockInto(c, buf)
				if err != nil && !errors.Is(err, store.ErrNotFound) {
					_ = s.Reset()
					return
				}
				found = err == nil
				if cap(data) > cap(buf) {
					buf = data[:0]
				}
			}
			if !found {
				if err := w.WriteByte(0); err != nil {
					_ = s.Reset()
					return
				}
				continue
			}
			hdr[0] = 1
			k := binary.PutUvarint(hdr[1:], uint64(len(data)))
			_, err := w.Write(hdr[:1+k])
			if err == nil && len(data) < w.Available() {
				_, err = w.Write(data)
			} else if err == nil {
				if err = w.Flush(); err == nil {
					_, err = s.Write(data)
				}
			}
			if err != nil {
				_ = s.Reset()
				return
			}
		}
		if err := w.Flush(); err != nil {
			_ = s.Reset()
		}
	})
}

// askBlocks requests cs from p and hands each block it sends, checked
// against its CID, to got.
func askBlocks(ctx context.Context, h host.Host, p peer.ID, cs []cid.Cid, got func(blocks.Block) error) error {
	s, err := h.NewStream(ctx, p, BlocksProtocol)
	if err != nil {
		return err
	}
	defer s.Close()
	stop := context.AfterFunc(ctx, func() { _ = s.Reset() })
	defer stop()
	w := bufio.NewWriter(s)
	var buf [binary.MaxVarintLen64]byte
	_, _ = w.Write(buf[:binary.PutUvarint(buf[:], uint64(len(cs)))])
	for _, c := range cs {
		b := c.Bytes()
		_, _ = w.Write(buf[:binary.PutUvarint(buf[:], uint64(len(b)))])
		_, _ = w.Write(b)
	}
	if err := w.Flush(); err != nil {
		_ = s.Reset()
		return err
	}
	if err := s.CloseWrite(); err != nil {
		_ = s.Reset()
		return err
	}
	r := bufio.NewReaderSize(s, 1<<20)
	for _, c := range cs {
		st, err := r.ReadByte()
		if err != nil {
			return err
		}
		if st == 0 {
			continue
		}
		if st != 1 {
			_ = s.Reset()
			return fmt.Errorf("dataset: blocks answer: status %d", st)
		}
		n, err := binary.ReadUvarint(r)
		if err != nil {
			return err
		}
		if n > maxBlockSize {
			_ = s.Reset()
			return fmt.Errorf("dataset: blocks answer: a block of %d bytes; allowed: at most %d", n, maxBlockSize)
		}
		data := make([]byte, n)
		if _, err := io.ReadFull(r, data); err != nil {
			return err
		}
		b, err := blocks.NewBlockWithCid(data, c)
		if err != nil {
			return err
		}
		if err := check(b); err != nil {
			_ = s.Reset()
			return err
		}
		if err := got(b); err != nil {
			return err
		}
	}
	return nil
}

// streamFetch fetches cs from peers with the blocks protocol, in requests of
// at most maxBlocksPerRequest CIDs, several in flight, storing blocks in
// large batches on a writer goroutine so receiving never waits for a synced
// write. It returns how many blocks it stored.
func (x *Exchange) streamFetch(ctx context.Context, peers []peer.ID, cs []cid.Cid, stored func(int)) (int, error) {
	if len(peers) == 0 {
		return 0, nil
	}
	var (
		mu       sync.Mutex
		total    int
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil && !errors.Is(err, context.Canceled) {
			firstErr = err
		}
		mu.Unlock()
	}
	const per = 64 // CIDs per request: ~16 MiB of chunks
	jobs := make(chan []cid.Cid)
	go func() {
		defer close(jobs)
		for i := 0; i < len(cs); i += per {
			select {
			case jobs <- cs[i:min(i+per, len(cs))]:
			case <-ctx.Done():
				return
			}
		}
	}()
	// The writer stores what the receivers verified, merging the batches
	// that queued up while it wrote.
	received := make(chan []blocks.Block, 4)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for batch := range received {
		more:
			for len(batch) < 4*per {
				select {
				case b, ok := <-received:
					if !ok {
						break more
					}
					batch = append(batch, b...)
				default:
					break more
				}
			}
			if err := x.store.PutMany(ctx, batch); err != nil {
				fail(err)
				continue
			}
			mu.Lock()
			total += len(batch)
			if stored != nil {
				stored(total)
			}
			mu.Unlock()
		}
	}()
	var wg sync.WaitGroup
	workers := min(4*len(peers), 8)
	for w := range workers {
		p := peers[w%len(peers)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				batch := make([]blocks.Block, 0, len(j))
				err := askBlocks(ctx, x.h, p, j, func(b blocks.Block) error {
					batch = append(batch, b)
					return nil
				})
				if len(batch) > 0 {
					received <- batch
				}
				if err != nil {
					fail(err)
				}
			}
		}()
	}
	wg.Wait()
	close(received)
	<-wrote
	mu.Lock()
	defer mu.Unlock()
	return total, firstErr
}
