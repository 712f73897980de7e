package p2p

import (
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Per-sender rate limits of the org topics (a token bucket per machine):
// a member's messages over the limit are ignored (not delivered; not
// rejected, since pubsub would then also penalise every honest peer that
// forwarded a copy), and each one it delivered itself is a strike against
// it. FloodStrikes strikes within a minute give it an application score of
// FloodScore for FloodPenalty: below the graylist threshold, so every RPC
// of it is ignored by this host's pubsub, on every topic. The limits are
// far above what a node sends: a heartbeat per interval, a beat per peer
// joining (at most one a second) and one per change of its instances (at
// most ten a second): some 16 a second at most with the shortest test
// interval; and a heads announcement per ledger write.
type RateLimit struct {
	PerSecond float64
	Burst     float64
}

// Limits per sender (variables for tests).
var (
	HeartbeatRate = RateLimit{PerSecond: 50, Burst: 250}
	HeadsRate     = RateLimit{PerSecond: 200, Burst: 2000}
	OfferRate     = RateLimit{PerSecond: 50, Burst: 500}
)

// Flood penalty (variables for tests; a host takes them when it starts).
var (
	FloodStrikes = 20
	FloodPenalty = 10 * time.Minute
)

// FloodScore is a flooder's application score: far below the graylist
// threshold (peerScoreThresholds).
const FloodScore = -100000

// floods counts strikes and keeps the penalised peers.
type floods struct {
	strikes0 int           // FloodStrikes when the host started
	penalty  time.Duration // FloodPenalty when the host started
	mu       sync.Mutex
	strikes  map[peer.ID][]time.Time
	until    map[peer.ID]time.Time
}

func newFloods() *floods {
	return &floods{strikes0: FloodStrikes, penalty: FloodPenalty, strikes: map[peer.ID][]time.Time{}, until: map[peer.ID]time.Time{}}
}

// strike records one over-limit message p delivered itself at now.
func (f *floods) strike(p peer.ID, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.strikes[p]
	for len(s) > 0 && now.Sub(s[0]) > time.Minute {
		s = s[1:]
	}
	s = append(s, now)
	if len(s) >= f.strikes0 {
		f.until[p] = now.Add(f.penalty)
		s = nil
	}
	if len(s) == 0 {
		delete(f.strikes, p)
	} else {
		f.strikes[p] = s
	}
	if len(f.strikes) > maxBuckets {
		clear(f.strikes)
	}
}

// score is pubsub's AppSpecificScore.
func (f *floods) score(p peer.ID) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.until[p]
	if !ok {
		return 0
	}
	if time.Now().After(t) {
		delete(f.until, p)
		return 0
	}
	return FloodScore
}

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
