package peersvc

import (
	"slices"
	"testing"
	"time"
)

// TestRedialerBackoff: a machine that stays unreachable is dialled at once,
// then after waits that double from min up to max (full jitter taken as its
// largest value here), and never waits longer than max.
func TestRedialerBackoff(t *testing.T) {
	r := newRedialer(250*time.Millisecond, 2*time.Second)
	r.jitter = func(n int64) int64 { return n - 1 } // the longest wait: b
	t0 := time.Unix(1000, 0)
	now := t0
	var gaps []time.Duration
	last := time.Time{}
	for i := 0; i < 8; i++ {
		dial, next := r.due(now, []string{"b"})
		if !slices.Equal(dial, []string{"b"}) {
			t.Fatalf("attempt %d at +%v: dial %v, want [b]", i, now.Sub(t0), dial)
		}
		if !last.IsZero() {
			gaps = append(gaps, now.Sub(last))
		}
		last = now
		// Just before next nothing is due.
		if d, _ := r.due(next.Add(-time.Nanosecond), []string{"b"}); len(d) != 0 {
			t.Fatalf("dial %v before it is due", d)
		}
		now = next
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	if !slices.Equal(gaps, want) {
		t.Errorf("gaps %v, want %v", gaps, want)
	}
}

// TestRedialerJitter: each wait lies between half the backoff and the whole.
func TestRedialerJitter(t *testing.T) {
	r := newRedialer(time.Second, 8*time.Second)
	now := time.Unix(0, 0)
	b := time.Second
	for i := 0; i < 200; i++ {
		_, next := r.due(now, []string{"x"})
		if w := next.Sub(now); w < b/2 || w > b {
			t.Fatalf("attempt %d: wait %v outside [%v, %v]", i, w, b/2, b)
		}
		now = next
		b = min(2*b, 8*time.Second)
	}
}

// TestRedialerReset: a machine connected again is forgotten, so its next
// loss is dialled at once and starts from min; machines are independent.
func TestRedialerReset(t *testing.T) {
	r := newRedialer(100*time.Millisecond, time.Second)
	r.jitter = func(n int64) int64 { return 0 } // the shortest wait: b/2
	now := time.Unix(0, 0)
	for i := 0; i < 5; i++ {
		_, next := r.due(now, []string{"a", "b"})
		now = next
	}
	if s := r.peers["a"]; s.backoff != time.Second {
		t.Fatalf("a's backoff %v after 5 attempts, want the cap 1s", s.backoff)
	}
	// a connects; c is new.
	dial, _ := r.due(now, []string{"b", "c"})
	if !slices.Equal(dial, []string{"b", "c"}) {
		t.Fatalf("dial %v, want [b c]", dial)
	}
	if _, ok := r.peers["a"]; ok {
		t.Fatal("a is still scheduled after it connected")
	}
	// a is lost again: due at once, backoff from min.
	now = now.Add(time.Millisecond)
	dial, next := r.due(now, []string{"a", "b", "c"})
	if !slices.Equal(dial, []string{"a"}) {
		t.Fatalf("dial %v, want [a]", dial)
	}
	if w := next.Sub(now); w != 50*time.Millisecond-time.Millisecond {
		// c was dialled 1ms ago with min backoff: due at +50ms of then.
		t.Fatalf("next due in %v, want 49ms", w)
	}
	// Nothing to reach: nothing due, no wake-up.
	if dial, next := r.due(now, nil); dial != nil || !next.IsZero() || len(r.peers) != 0 {
		t.Fatalf("empty: dial %v next %v peers %d", dial, next, len(r.peers))
	}
}

func TestRedialMin(t *testing.T) {
	for iv, want := range map[time.Duration]time.Duration{
		time.Second:            250 * time.Millisecond,
		30 * time.Second:       time.Second,
		200 * time.Millisecond: 50 * time.Millisecond,
	} {
		if got := redialMin(iv); got != want {
			t.Errorf("redialMin(%v) = %v, want %v", iv, got, want)
		}
	}
}

func TestMergeAddrs(t *testing.T) {
	for _, tc := range []struct {
		fresh, old, want []string
	}{
		{nil, nil, []string{}},
		{[]string{"a", "b"}, nil, []string{"a", "b"}},
		{[]string{"c"}, []string{"a", "b", "c"}, []string{"c", "a", "b"}},
		{[]string{"a", "a", ""}, []string{"b", "a"}, []string{"a", "b"}},
		{[]string{"1", "2", "3"}, []string{"4", "5"}, []string{"1", "2", "3", "4"}}, // capped at 4
	} {
		if got := mergeAddrs(tc.fresh, tc.old, 4); !slices.Equal(got, tc.want) {
			t.Errorf("mergeAddrs(%v, %v) = %v, want %v", tc.fresh, tc.old, got, tc.want)
		}
	}
}
