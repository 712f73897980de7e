package events

import (
	"sync"
	"time"
)

// RingSize is how many recent events a Bus keeps for replay.
const RingSize = 4096

// SubBuffer is how many events a subscriber may fall behind before it is
// cut off (it resumes from the ring with Last-Event-ID).
const SubBuffer = 512

// Bus numbers events, keeps the last RingSize of them, and hands them to
// subscribers and hooks. Publish never blocks: a subscriber that falls
// SubBuffer events behind is cut off (its channel closed, Lagged true).
type Bus struct {
	mu     sync.Mutex
	ring   []slot // ring[(head+i) % len]: the last RingSize events
	n      int    // events in ring
	head   int    // index of the oldest
	next   uint64 // the next event's ID
	subs   map[*Sub]struct{}
	hooks  []hook
	closed bool
	now    func() time.Time
}

// NewBus makes a bus whose IDs start at the microseconds of now(): a
// restarted node's IDs are above its last run's, so a client resuming
// with an old Last-Event-ID is replayed the whole ring, not nothing.
func NewBus(now func() time.Time) *Bus {
	start := uint64(max(now().UnixMicro(), 1))
	return &Bus{ring: make([]slot, RingSize), next: start, subs: map[*Sub]struct{}{}, now: now}
}

// slot is one event of the ring: built, or (d.entry not nil) described,
// to be built when the ring is read (e holds its ID, topic, type and Mine
// until then).
type slot struct {
	e Event
	d described
}

// Sub is one subscription.
type Sub struct {
	C      <-chan Event
	c      chan Event
	topics Topics
	lagged bool
}

// Lagged says the subscription was cut off for falling behind (read it
// after C is closed).
func (s *Sub) Lagged() bool { return s.lagged }

type hook struct {
	want func(typ string, mine bool) bool // nil: every event
	fn   func(Event)
}

// OnPublish calls fn with every event from now on, synchronously in
// Publish: fn must not block (node/events.Notifier queues).
func (b *Bus) OnPublish(fn func(Event)) { b.OnPublishOf(nil, fn) }

// OnPublishOf is OnPublish for the events of the types, and of this node
// or not (Event.Mine), that want takes: PublishBatch need not build the
// others.
func (b *Bus) OnPublishOf(want func(typ string, mine bool) bool, fn func(Event)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hooks = append(b.hooks, hook{want: want, fn: fn})
}

// Publish numbers es, stamps the time where it is zero and the topic from
// the type, keeps them and hands them on.
func (b *Bus) Publish(es ...Event) { b.PublishBatch(&Batch{mid: es}) }

// PublishBatch publishes the events of bt as Publish would, except that
// an entry's or an item's event that no subscriber's topics or hook take
// is not built: the ring keeps it described (its entry and item), and
// builds it if it is read (Recent, Subscribe) before it leaves.
func (b *Bus) PublishBatch(bt *Batch) {
	n := bt.Len()
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	now := b.now()
	for i := range n {
		d, mine, ok := bt.describe(i)
		switch {
		case !ok:
			b.publishLocked(bt.At(i), now)
		case b.wantedLocked(d.typ(), mine):
			b.publishLocked(d.build(mine), now)
		default:
			typ := d.typ()
			b.keepLocked(slot{e: Event{ID: b.next, Type: typ, Topic: TopicOf(typ), Mine: mine}, d: d})
			b.next++
		}
	}
}

// wantedLocked says a subscriber or a hook takes an event of type typ.
func (b *Bus) wantedLocked(typ string, mine bool) bool {
	topic := TopicOf(typ)
	for s := range b.subs {
		if s.topics.Has(topic) {
			return true
		}
	}
	for _, h := range b.hooks {
		if h.want == nil || h.want(typ, mine) {
			return true
		}
	}
	return false
}

// publishLocked numbers e, stamps it, keeps it in the ring and hands it
// on. b.mu must be held.
func (b *Bus) publishLocked(e Event, now time.Time) {
	e.ID = b.next
	b.next++
	if e.Time.IsZero() {
		e.Time = now
	}
	e.Time = e.Time.UTC()
	e.Topic = TopicOf(e.Type)
	b.keepLocked(slot{e: e})
	for s := range b.subs {
		if !s.topics.Has(e.Topic) {
			continue
		}
		select {
		case s.c <- e:
		default:
			s.lagged = true
			b.dropLocked(s)
		}
	}
	for _, h := range b.hooks {
		if h.want == nil || h.want(e.Type, e.Mine) {
			h.fn(e)
		}
	}
}

// keepLocked puts s in the ring, in place of the oldest when it is full.
func (b *Bus) keepLocked(s slot) {
	if b.n < len(b.ring) {
		b.ring[(b.head+b.n)%len(b.ring)] = s
		b.n++
	} else {
		b.ring[b.head] = s
		b.head = (b.head + 1) % len(b.ring)
	}
}

// eventLocked is the ring's i-th event, oldest first, built if it was
// kept unbuilt.
func (b *Bus) eventLocked(i int) Event {
	s := &b.ring[(b.head+i)%len(b.ring)]
	if s.d.entry != nil {
		e := s.d.build(s.e.Mine)
		e.ID, e.Topic, e.Time = s.e.ID, s.e.Topic, e.Time.UTC()
		*s = slot{e: e}
	}
	return s.e
}

// Recent is the ring's events of topics with an ID above after, oldest
// first, and whether events above after have already left the ring (a
// gap).
func (b *Bus) Recent(topics Topics, after uint64) (out []Event, gap bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.recentLocked(topics, after)
}

func (b *Bus) recentLocked(topics Topics, after uint64) (out []Event, gap bool) {
	for i := 0; i < b.n; i++ {
		e := b.ring[(b.head+i)%len(b.ring)].e // its ID and topic, built or not
		if i == 0 && after+1 < e.ID && after != 0 {
			gap = true
		}
		if e.ID > after && topics.Has(e.Topic) {
			out = append(out, b.eventLocked(i))
		}
	}
	return out, gap
}

// Subscribe returns the ring's events of topics above after (none when
// replay is false) and a subscription to those that follow, with no event
// lost or repeated between the two. Cancel it with Unsubscribe. On a
// closed bus the subscription's channel is closed.
func (b *Bus) Subscribe(topics Topics, after uint64, replay bool) (backlog []Event, gap bool, s *Sub) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := make(chan Event, SubBuffer)
	s = &Sub{C: c, c: c, topics: topics}
	if replay {
		backlog, gap = b.recentLocked(topics, after)
	}
	if b.closed {
		close(c)
		return backlog, gap, s
	}
	b.subs[s] = struct{}{}
	return backlog, gap, s
}

// Unsubscribe ends s.
func (b *Bus) Unsubscribe(s *Sub) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropLocked(s)
}

func (b *Bus) dropLocked(s *Sub) {
	if _, ok := b.subs[s]; ok {
		delete(b.subs, s)
		close(s.c)
	}
}

// Close ends every subscription (their streams end: the API's server can
// then shut down) and drops later events.
func (b *Bus) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for s := range b.subs {
		b.dropLocked(s)
	}
}
