package p2p

import (
	"sync"
	"time"
)

// Per-sender rate limits of the org topics (a token bucket per machine):
// a member that floods a topic has its excess messages rejected when it
// delivers them itself (each rejection costs it peer score, and about five
// get it graylisted: every RPC of it ignored) and ignored when another peer
// forwards them (that peer is honest: it accepted them at its own pace).
// The limits are far above what a node sends: a heartbeat per interval
// plus a beat per peer joining (at most one a second), and a heads
// announcement per ledger write.
type RateLimit struct {
	PerSecond float64
	Burst     float64
}

// Limits per sender (variables for tests).
var (
	HeartbeatRate = RateLimit{PerSecond: 20, Burst: 100}
	HeadsRate     = RateLimit{PerSecond: 200, Burst: 2000}
	OfferRate     = RateLimit{PerSecond: 50, Burst: 500}
)

// maxBuckets bounds a limiter's memory; full buckets are forgotten first.
const maxBuckets = 4096

type limiter struct {
	lim RateLimit
	mu  sync.Mutex
	b   map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(l RateLimit) *limiter { return &limiter{lim: l, b: map[string]*bucket{}} }

// allow takes a token from key's bucket at now, if there is one.
func (l *limiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.b[key]
	if b == nil {
		if len(l.b) >= maxBuckets {
			l.prune(now)
		}
		b = &bucket{tokens: l.lim.Burst, at: now}
		l.b[key] = b
	}
	if dt := now.Sub(b.at).Seconds(); dt > 0 {
		b.tokens = min(l.lim.Burst, b.tokens+dt*l.lim.PerSecond)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// prune forgets buckets that have refilled (they start full anyway), or all
// of them when none has.
func (l *limiter) prune(now time.Time) {
	for k, b := range l.b {
		if b.tokens+now.Sub(b.at).Seconds()*l.lim.PerSecond >= l.lim.Burst {
			delete(l.b, k)
		}
	}
	if len(l.b) >= maxBuckets {
		clear(l.b)
	}
}
