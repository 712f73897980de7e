package dataset

import (
	"context"
	"crypto/sha256"
	"io"
	"runtime"
	"sync"

	"github.com/cshare/cshare/ledger/store"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/multiformats/go-multihash"
)

// The importer keeps boxo's balanced layout (so the DAG is kubo's, byte for
// byte) but moves the two costs of an import off the layout's goroutine:
// hashing the leaves (hashingSplitter reads chunks ahead and hashes them on
// every core; leafBuilder hands boxo the CID already computed) and storing
// the blocks (blockWriter writes large batches on its own goroutine while
// the next ones are hashed).

// readAhead is how many chunks are read and hashed ahead of the layout.
const readAhead = 32

// chunkBufs holds chunk buffers imports made and stored, for the next
// chunks (of this import or a later one) to be read into, not into fresh
// memory, whose page faults and zeroing cost about as much as hashing. The
// buffers are cut from slabs of huge pages (newChunks); the garbage
// collector empties the pool when imports stop and frees a slab once none
// of its buffers is in use.
var chunkBufs sync.Pool

// chunkPool lends an import chunk buffers: a buffer is in use from the read
// until the writer stored it. chunks lends out buffers and takes back only
// those it lent.
type chunkPool struct {
	mu   sync.Mutex
	lent map[*byte]bool
}

func newChunkPool() *chunkPool { return &chunkPool{lent: map[*byte]bool{}} }

func (p *chunkPool) get() []byte {
	a, ok := chunkBufs.Get().(*[ChunkSize]byte)
	if !ok {
		a = newChunks()
	}
	b := a[:]
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lent[&b[0]] = true
	return b
}

// chunkSlab is the memory newChunks takes at once.
const chunkSlab = 16 << 20

// newChunks cuts a new slab of huge pages (hugeBuf) into chunk buffers,
// returns the first and leaves the others in chunkBufs.
func newChunks() *[ChunkSize]byte {
	slab := hugeBuf(chunkSlab)
	for off := ChunkSize; off < len(slab); off += ChunkSize {
		chunkBufs.Put((*[ChunkSize]byte)(slab[off : off+ChunkSize]))
	}
	return (*[ChunkSize]byte)(slab[:ChunkSize])
}

// put takes back data if it is a buffer get lent and reports whether it
// did (else it does nothing).
func (p *chunkPool) put(data []byte) bool {
	if cap(data) != ChunkSize {
		return false
	}
	b := data[:ChunkSize]
	p.mu.Lock()
	ok := p.lent[&b[0]]
	delete(p.lent, &b[0])
	p.mu.Unlock()
	if ok {
		chunkBufs.Put((*[ChunkSize]byte)(b))
	}
	return ok
}

// chunk is one chunk of a file, read ahead and hashed.
type chunk struct {
	data []byte
	cid  cid.Cid
	err  error
	done chan struct{}
}

// hashingSplitter is a chunker.Splitter cutting a reader into ChunkSize
// chunks (as boxo's SizeSplitter does) that reads ahead and hashes each
// chunk as a raw leaf on several goroutines.
type hashingSplitter struct {
	r     io.Reader
	pool  *chunkPool
	queue chan *chunk
	stop  chan struct{}
	once  sync.Once
	last  *chunk // the chunk NextBytes returned last
	done  int64  // bytes returned so far
}

func newHashingSplitter(r io.Reader, pool *chunkPool) *hashingSplitter {
	s := &hashingSplitter{r: r, pool: pool, queue: make(chan *chunk, readAhead), stop: make(chan struct{})}
	go s.run(max(runtime.GOMAXPROCS(0), 1))
	return s
}

func (s *hashingSplitter) run(workers int) {
	work := make(chan *chunk, readAhead)
	for range workers {
		go func() {
			for c := range work {
				c.cid = rawCID(c.data)
				close(c.done)
			}
		}()
	}
	defer close(work)
	defer close(s.queue)
	for {
		buf := s.pool.get()
		n, err := io.ReadFull(s.r, buf)
		if n > 0 {
			c := &chunk{data: buf[:n], done: make(chan struct{})}
			select {
			case s.queue <- c:
			case <-s.stop:
				return
			}
			work <- c
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return
		}
		if err != nil {
			c := &chunk{err: err, done: make(chan struct{})}
			close(c.done)
			select {
			case s.queue <- c:
			case <-s.stop:
			}
			return
		}
	}
}

// rawCID is the CIDv1 of a raw block with a sha2-256 multihash.
func rawCID(data []byte) cid.Cid {
	sum := sha256.Sum256(data)
	mh, _ := multihash.Encode(sum[:], multihash.SHA2_256) // cannot fail for sha2-256
	return cid.NewCidV1(cid.Raw, mh)
}

// NextBytes returns the next chunk, or io.EOF after the last.
func (s *hashingSplitter) NextBytes() ([]byte, error) {
	c, ok := <-s.queue
	if !ok {
		return nil, io.EOF
	}
	<-c.done
	if c.err != nil {
		return nil, c.err
	}
	s.last = c
	s.done += int64(len(c.data))
	return c.data, nil
}

// Reader is the reader beneath (chunker.Splitter).
func (s *hashingSplitter) Reader() io.Reader { return s.r }

// close stops reading ahead; the splitter must not be used after.
func (s *hashingSplitter) close() {
	s.once.Do(func() { close(s.stop) })
	for range s.queue { // let the reader see stop and end
	}
}

// fileBuilder is kubo's CIDv1 builder whose raw leaves take the CID the
// splitter computed for the chunk just returned.
type fileBuilder struct{ s *hashingSplitter }

func (b fileBuilder) Sum(data []byte) (cid.Cid, error) { return cidBuilder.Sum(data) }
func (b fileBuilder) GetCodec() uint64                 { return cidBuilder.GetCodec() }
func (b fileBuilder) WithCodec(c uint64) cid.Builder {
	if c == cid.Raw {
		return leafBuilder(b)
	}
	if c == cidBuilder.GetCodec() {
		return b
	}
	return cidBuilder.WithCodec(c)
}

// leafBuilder makes raw leaves' CIDs: the splitter's when data is the chunk
// it returned last (the same bytes, not a copy), else by hashing.
type leafBuilder struct{ s *hashingSplitter }

func (b leafBuilder) Sum(data []byte) (cid.Cid, error) {
	if l := b.s.last; l != nil && len(data) > 0 && len(data) == len(l.data) && &data[0] == &l.data[0] {
		return l.cid, nil
	}
	return rawCID(data), nil
}
func (b leafBuilder) GetCodec() uint64 { return cid.Raw }
func (b leafBuilder) WithCodec(c uint64) cid.Builder {
	if c == cid.Raw {
		return b
	}
	return fileBuilder(b).WithCodec(c)
}

// writeBatch is the bytes of blocks the writer stores in one write.
const writeBatch = 16 << 20

// flushEvery is the bytes the writer puts between flushes (and what an
// interrupted import can leave in packs that nothing points at).
const flushEvery = 1 << 30

// blockWriter is an ipld.DAGService that stores added blocks in large
// batches on its own goroutine through a store.DataWriter (one write per
// batch, blocks already stored skipped, one flush per flushEvery bytes and
// one when the blocks are committed), pinning them with pin when not nil.
// Get and Remove wait for the writes in flight first. Commit stores what
// is left, flushes, and reports the first error.
type blockWriter struct {
	ctx   context.Context // the import's: Add fails once it is done
	pool  *chunkPool      // takes back the chunk buffers once stored
	bs    *Blockstore
	dw    *store.DataWriter
	batch []store.Block
	size  int
	ch    chan []store.Block
	done  chan struct{}
	mu    sync.Mutex
	err   error
}

func newBlockWriter(ctx context.Context, bs *Blockstore, pin *store.Pin, pool *chunkPool) (*blockWriter, error) {
	dw, err := bs.s.NewDataWriter(pin)
	if err != nil {
		return nil, err
	}
	w := &blockWriter{ctx: ctx, bs: bs, dw: dw, pool: pool}
	w.start()
	return w, nil
}

func (w *blockWriter) start() {
	w.ch = make(chan []store.Block, 2)
	w.done = make(chan struct{})
	go func(ch chan []store.Block, done chan struct{}) {
		defer close(done)
		for b := range ch {
			if w.failed() != nil {
				continue
			}
			if _, err := w.dw.Put(b); err != nil {
				w.fail(err)
				continue
			}
			for _, blk := range b {
				w.pool.put(blk.Data)
			}
			if w.dw.Unflushed() >= flushEvery {
				if err := w.dw.Flush(); err != nil {
					w.fail(err)
				}
			}
		}
	}(w.ch, w.done)
}

func (w *blockWriter) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *blockWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Add queues a block for storing.
func (w *blockWriter) Add(_ context.Context, nd ipld.Node) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if err := w.failed(); err != nil {
		return err
	}
	w.batch = append(w.batch, store.Block{CID: nd.Cid(), Data: nd.RawData()})
	if w.size += len(nd.RawData()); w.size >= writeBatch {
		select {
		case w.ch <- w.batch:
		case <-w.ctx.Done():
			return w.ctx.Err()
		}
		w.batch, w.size = nil, 0
	}
	return nil
}

// AddMany queues blocks for storing.
func (w *blockWriter) AddMany(ctx context.Context, nds []ipld.Node) error {
	for _, nd := range nds {
		if err := w.Add(ctx, nd); err != nil {
			return err
		}
	}
	return nil
}

// Commit stores every queued block, waits for the writes and flushes
// them; the writer can be used again after.
func (w *blockWriter) Commit() error {
	w.drain()
	w.start()
	return w.failed()
}

// drain stores the queued blocks, ends the writer's goroutine and flushes.
func (w *blockWriter) drain() {
	if len(w.batch) > 0 {
		w.ch <- w.batch
		w.batch, w.size = nil, 0
	}
	close(w.ch)
	<-w.done
	if w.failed() == nil {
		if err := w.dw.Flush(); err != nil {
			w.fail(err)
		}
	}
}

// stop stores the blocks still queued (an import that failed half way
// leaves what it made for a rerun to reuse) and ends the writer.
func (w *blockWriter) stop() {
	w.drain()
	w.dw.Close()
}

func (w *blockWriter) Get(ctx context.Context, c cid.Cid) (ipld.Node, error) {
	if err := w.Commit(); err != nil {
		return nil, err
	}
	return DAGService(w.bs).Get(ctx, c)
}

func (w *blockWriter) GetMany(ctx context.Context, cs []cid.Cid) <-chan *ipld.NodeOption {
	if err := w.Commit(); err != nil {
		ch := make(chan *ipld.NodeOption, 1)
		ch <- &ipld.NodeOption{Err: err}
		close(ch)
		return ch
	}
	return DAGService(w.bs).GetMany(ctx, cs)
}

func (w *blockWriter) Remove(ctx context.Context, c cid.Cid) error {
	return w.RemoveMany(ctx, []cid.Cid{c})
}

// RemoveMany does nothing: an import keeps every block it made (one no
// dataset refers to is collected by the next dataset removal).
func (w *blockWriter) RemoveMany(context.Context, []cid.Cid) error { return nil }
