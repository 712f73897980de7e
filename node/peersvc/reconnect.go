package peersvc

import (
	"math/rand/v2"
	"sort"
	"time"
)

// redialer is the pure schedule of reconnection attempts: for each machine
// this node should be connected to and is not, when to dial it next. Time is
// passed in and nothing here dials, sleeps or logs; Redial does.
//
// Backoff is exponential per machine, from min doubling up to max (the
// heartbeat interval), with jitter: an attempt made with backoff b is
// followed by the next one between b/2 and b later. Machines that restart
// together then do not dial each other in step, and a machine that is gone
// costs one dial an interval. A machine that is connected again (absent
// from the list given to due) is forgotten, so its next loss starts over at
// min.
type redialer struct {
	min, max time.Duration
	// jitter returns a value in [0, n); nil means math/rand/v2.
	jitter func(n int64) int64
	peers  map[string]*redialState
}

type redialState struct {
	next    time.Time     // the next attempt is due at or after next
	backoff time.Duration // the wait that follows the next attempt
}

// newRedialer returns a schedule with backoff from min up to max.
func newRedialer(min, max time.Duration) *redialer {
	if min <= 0 {
		min = max
	}
	if min > max {
		min = max
	}
	return &redialer{min: min, max: max, peers: map[string]*redialState{}}
}

// redialMin is the first backoff for a node with heartbeat interval iv: a
// quarter interval, at most a second.
func redialMin(iv time.Duration) time.Duration {
	return min(iv/4, time.Second)
}

// due takes the machines that are not connected now and returns those to
// dial now, sorted, each one's next attempt scheduled; and when the next
// attempt of any of them falls due (the zero time if none is waiting). A
// machine seen for the first time is due at once.
func (r *redialer) due(now time.Time, disconnected []string) (dial []string, next time.Time) {
	want := make(map[string]bool, len(disconnected))
	for _, id := range disconnected {
		want[id] = true
	}
	for id := range r.peers {
		if !want[id] {
			delete(r.peers, id) // connected again, or no longer a machine to reach
		}
	}
	for id := range want {
		s := r.peers[id]
		if s == nil {
			s = &redialState{next: now, backoff: r.min}
			r.peers[id] = s
		}
		if !now.Before(s.next) {
			dial = append(dial, id)
			s.next = now.Add(r.wait(s.backoff))
			s.backoff = min(2*s.backoff, r.max)
		}
		if next.IsZero() || s.next.Before(next) {
			next = s.next
		}
	}
	sort.Strings(dial)
	return dial, next
}

// wait is backoff b with jitter: between b/2 and b.
func (r *redialer) wait(b time.Duration) time.Duration {
	half := int64(b / 2)
	if half <= 0 {
		return b
	}
	j := r.jitter
	if j == nil {
		j = rand.Int64N
	}
	return time.Duration(half + j(int64(b)-half+1))
}
