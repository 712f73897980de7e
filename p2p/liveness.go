package p2p

import (
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// DefaultInterval is the heartbeat interval when neither the caller nor the
// heartbeat names one (docs/design.md §8).
const DefaultInterval = 30 * time.Second

// OfflineAfter is how many intervals without a heartbeat make a machine
// Offline.
const OfflineAfter = 3

// Seen is a heartbeat and the local time it was observed.
type Seen struct {
	Heartbeat Heartbeat `json:"heartbeat"`
	At        time.Time `json:"at"`
}

// Liveness tracks the latest heartbeat of every machine. It holds no clock:
// every method that needs the time takes it. The zero value is ready to use
// and it is safe for concurrent use.
type Liveness struct {
	mu  sync.RWMutex
	m   map[string]Seen
	gen uint64
}

// Gen counts the changes recorded so far: a cache built from All is current
// while Gen is unchanged (up to the passing of time, which Online measures).
func (l *Liveness) Gen() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.gen
}

// Observe records hb as seen at now. A heartbeat with a lower Seq than the
// one kept is ignored; the same Seq seen again keeps the later time (it was
// first learned second-hand, e.g. from FetchSeen, and then arrived by gossip).
func (l *Liveness) Observe(hb Heartbeat, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]Seen)
	}
	cur, ok := l.m[hb.Machine]
	l.gen++
	switch {
	case !ok || hb.Seq > cur.Heartbeat.Seq:
		l.m[hb.Machine] = Seen{Heartbeat: hb, At: now}
	case hb.Seq == cur.Heartbeat.Seq && now.After(cur.At):
		cur.At = now
		l.m[hb.Machine] = cur
	}
}

// Last returns the latest heartbeat of id and when it was seen.
func (l *Liveness) Last(id peer.ID) (Heartbeat, time.Time, bool) {
	return l.LastOf(id.String())
}

// LastOf is Last by the machine ID's string form (no decoding).
func (l *Liveness) LastOf(id string) (Heartbeat, time.Time, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	s, ok := l.m[id]
	return s.Heartbeat, s.At, ok
}

// Online reports whether id sent a heartbeat within OfflineAfter intervals of
// now. interval <= 0 means the interval the machine announced in its last
// heartbeat, or DefaultInterval if it announced none.
func (l *Liveness) Online(id peer.ID, now time.Time, interval time.Duration) bool {
	hb, at, ok := l.Last(id)
	if !ok {
		return false
	}
	if interval <= 0 {
		interval = time.Duration(hb.Interval) * time.Millisecond
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	return now.Sub(at) <= OfflineAfter*interval
}

// Forget drops id (e.g. a removed machine).
func (l *Liveness) Forget(id peer.ID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id.String())
	l.gen++
}

// All returns every machine's latest heartbeat, sorted by machine ID.
func (l *Liveness) All() []Seen {
	l.mu.RLock()
	out := make([]Seen, 0, len(l.m))
	for _, s := range l.m {
		out = append(out, s)
	}
	l.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Heartbeat.Machine < out[j].Heartbeat.Machine })
	return out
}
