package sim

import (
	"crypto/sha256"
	"slices"
	"time"

	pb "github.com/libp2p/go-libp2p-pubsub/pb"
)

// Topics.
const (
	tHeartbeat = 0
	tLedger    = 1
)

// Traffic categories, counted per machine.
const (
	cHeartbeat = iota // heartbeats: published and forwarded copies
	cLedger           // heads announcements (with the entries they push)
	cIHave            // lazy gossip: IHAVE
	cIWant            // IWANT, and the messages sent in answer
	cSync             // sync streams: requests and the entries answered
	nCats
)

var catNames = [nCats]string{"heartbeat", "ledger", "ihave", "iwant", "sync"}

// counter is what a machine sent or received, by category.
type counter struct {
	msgs  [nCats]int64
	bytes [nCats]int64
}

// message is one gossip message: its data, what every machine has done
// with it, and the memo of its stateless checks.
type message struct {
	idx    int32 // in world.msgs
	topic  uint8
	data   []byte
	size   int // bytes of a GossipSub RPC that carries it
	origin int32
	at     time.Duration
	seen   bitset // machines that received a copy
	// reached counts the machines that accepted it (the origin too);
	// lastAt is when the last one did, hops the most forwarding hops.
	reached int32
	lastAt  time.Duration
	hops    uint8
	// The stateless checks' verdict and what they decoded (see check).
	checked bool
	err     error
	hb      *heartbeatInfo
	heads   *headsInfo
}

// rpcSize is the size of a length-prefixed GossipSub RPC.
func rpcSize(r *pb.RPC) int {
	n := r.Size()
	for v := n; ; v >>= 7 {
		n++
		if v < 0x80 {
			return n
		}
	}
}

func (w *world) newMessage(m *machine, topic uint8, data []byte) *message {
	t := w.topics[topic]
	msg := &message{idx: int32(len(w.msgs)), topic: topic, data: data, origin: int32(m.idx), at: w.now, seen: newBitset(len(w.ms)),
		size: rpcSize(&pb.RPC{Publish: []*pb.Message{{Data: data, Topic: &t}}})}
	w.msgs = append(w.msgs, msg)
	return msg
}

// publish sends m's own message: to every connected peer (flood
// publishing), or to its mesh.
func (w *world) publish(m *machine, msg *message, cat int) {
	msg.seen.set(m.idx)
	w.accept(m, msg, 0)
	to := m.conns
	if w.cfg.MeshPublish {
		to = m.mesh[msg.topic]
	}
	for _, p := range to {
		w.send(m, w.ms[p], msg, cat, 1)
	}
}

// send puts one copy of msg on the link from m to p: it leaves when m's
// uplink is free, and arrives a link latency after.
func (w *world) send(m, p *machine, msg *message, cat int, hops uint8) {
	w.transmit(m, p, cat, msg.size, func() { w.receive(p, m, msg, hops) })
}

// transmit counts size bytes from m to p and runs then on p's side when
// they arrive.
func (w *world) transmit(m, p *machine, cat, size int, then func()) {
	m.tx.msgs[cat]++
	m.tx.bytes[cat] += int64(size)
	p.rx.msgs[cat]++
	p.rx.bytes[cat] += int64(size)
	start := max(w.now, m.upFree)
	m.upFree = start + time.Duration(float64(size)/w.cfg.Bandwidth*float64(time.Second))
	w.at(m.upFree-w.now+w.cfg.Latency, then)
}

// receive is a copy of msg arriving at m from src: a duplicate is dropped
// (GossipSub's seen-cache); a first copy costs m the validation's CPU,
// then is validated, and forwarded to m's mesh when accepted.
func (w *world) receive(m, src *machine, msg *message, hops uint8) {
	if msg.seen.has(m.idx) {
		return
	}
	msg.seen.set(m.idx)
	cost := w.cfg.CostHeartbeat
	if msg.topic == tLedger {
		cost = w.cfg.CostHeads
	}
	start := max(w.now, m.cpuFree)
	m.cpuFree = start + cost
	w.at(m.cpuFree-w.now, func() {
		if !w.validate(m, msg) {
			return
		}
		w.accept(m, msg, hops)
		for _, p := range m.mesh[msg.topic] {
			if p != int32(src.idx) {
				w.send(m, w.ms[p], msg, catOf(msg.topic), hops+1)
			}
		}
	})
}

func catOf(topic uint8) int {
	if topic == tLedger {
		return cLedger
	}
	return cHeartbeat
}

// accept records msg at m (into its message cache for lazy gossip) and
// hands it to m's node.
func (w *world) accept(m *machine, msg *message, hops uint8) {
	msg.reached++
	msg.lastAt = w.now
	msg.hops = max(msg.hops, hops)
	m.recent[msg.topic][0] = append(m.recent[msg.topic][0], msg.idx)
	switch msg.topic {
	case tHeartbeat:
		w.onHeartbeat(m, msg)
	case tLedger:
		w.onHeads(m, msg)
	}
}

// gossipTick is every machine's GossipSub heartbeat (once a second): lazy
// gossip of the message IDs of the last 3 seconds to Dlazy connected peers
// outside the mesh, which ask (IWANT) for those they have not seen.
func (w *world) gossipTick() {
	for _, m := range w.ms {
		for topic := uint8(0); topic < 2; topic++ {
			r := &m.recent[topic]
			var ids []int32
			for _, win := range r {
				ids = append(ids, win...)
			}
			if len(ids) > 0 && w.cfg.Dlazy > 0 {
				w.ihave(m, topic, ids)
			}
			r[2], r[1], r[0] = r[1], r[0], r[2][:0]
		}
	}
	if !w.stop {
		w.at(time.Second, w.gossipTick)
	}
}

// ihave sends IHAVE(ids) from m to Dlazy random peers outside its mesh.
func (w *world) ihave(m *machine, topic uint8, ids []int32) {
	cand := make([]int32, 0, len(m.conns))
	for _, p := range m.conns {
		if !slices.Contains(m.mesh[topic], p) {
			cand = append(cand, p)
		}
	}
	if len(ids) > maxIHaveLength {
		ids = ids[len(ids)-maxIHaveLength:]
	}
	size := w.ihaveSize(topic, len(ids))
	for k := 0; k < w.cfg.Dlazy && len(cand) > 0; k++ {
		i := w.rng.IntN(len(cand))
		p := w.ms[cand[i]]
		cand[i] = cand[len(cand)-1]
		cand = cand[:len(cand)-1]
		w.transmit(m, p, cIHave, size, func() {
			var want []int32
			for _, id := range ids {
				if !w.msgs[id].seen.has(p.idx) && !slices.Contains(want, id) {
					want = append(want, id)
				}
			}
			if len(want) == 0 {
				return
			}
			w.transmit(p, m, cIWant, w.iwantSize(len(want)), func() {
				for _, id := range want {
					w.send(m, p, w.msgs[id], cIWant, 1)
				}
			})
		})
	}
}

// maxIHaveLength is GossipSub's cap on the IDs of one IHAVE.
const maxIHaveLength = 5000

func (w *world) ihaveSize(topic uint8, n int) int {
	t := w.topics[topic]
	ids := make([]string, n)
	for i := range ids {
		ids[i] = string(make([]byte, sha256.Size))
	}
	return rpcSize(&pb.RPC{Control: &pb.ControlMessage{Ihave: []*pb.ControlIHave{{TopicID: &t, MessageIDs: ids}}}})
}

func (w *world) iwantSize(n int) int {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = string(make([]byte, sha256.Size))
	}
	return rpcSize(&pb.RPC{Control: &pb.ControlMessage{Iwant: []*pb.ControlIWant{{MessageIDs: ids}}}})
}

// connect links every machine to Dial others at random (links are
// symmetric), then builds each topic's mesh: every machine grafts D of its
// peers, and one above Dhi prunes back to D.
func (w *world) connect() {
	n := len(w.ms)
	conn := make([]map[int32]bool, n)
	for i := range conn {
		conn[i] = map[int32]bool{}
	}
	for i := 0; i < n; i++ {
		for k := 0; k < min(w.cfg.Dial, n-1); k++ {
			j := int32(w.rng.IntN(n))
			if int(j) == i || conn[i][j] {
				continue
			}
			conn[i][j], conn[j][int32(i)] = true, true
		}
	}
	for i, m := range w.ms {
		for j := range conn[i] {
			m.conns = append(m.conns, j)
		}
		slices.Sort(m.conns) // no map order
	}
	for topic := 0; topic < 2; topic++ {
		mesh := make([]map[int32]bool, n)
		for i := range mesh {
			mesh[i] = map[int32]bool{}
		}
		for i, m := range w.ms {
			cand := slices.Clone(m.conns)
			w.rng.Shuffle(len(cand), func(a, b int) { cand[a], cand[b] = cand[b], cand[a] })
			for _, j := range cand {
				if len(mesh[i]) >= w.cfg.D {
					break
				}
				if len(mesh[j]) >= w.cfg.Dhi {
					continue // it would prune us
				}
				mesh[i][j], mesh[j][int32(i)] = true, true
			}
		}
		for i, m := range w.ms {
			for j := range mesh[i] {
				m.mesh[topic] = append(m.mesh[topic], j)
			}
			slices.Sort(m.mesh[topic])
		}
	}
}

// bitset is a set of small non-negative integers.
type bitset []uint64

func newBitset(n int) bitset { return make(bitset, (n+63)/64) }

func (b bitset) has(i int) bool { return i/64 < len(b) && b[i/64]&(1<<(i%64)) != 0 }
func (b bitset) set(i int)      { b[i/64] |= 1 << (i % 64) }

// growSet sets i in *b, growing it as needed.
func growSet(b *bitset, i int) {
	for i/64 >= len(*b) {
		*b = append(*b, 0)
	}
	b.set(i)
}
