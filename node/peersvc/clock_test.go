package peersvc

import (
	"testing"
	"time"
)

// A heartbeat's time of arrival that p2p read on the system clock keeps its
// age on a node whose clock is skewed (FAKETIME): were the clocks mixed, a
// node 5 minutes ahead would see every fetched heartbeat as 5 minutes old
// and every machine offline.
func TestOnOwnClockKeepsAge(t *testing.T) {
	for _, skew := range []time.Duration{5 * time.Minute, -5 * time.Minute, 0} {
		s := &Service{d: Deps{Now: func() time.Time { return time.Now().Add(skew) }}}
		at := time.Now().Add(-2 * time.Second)
		age := s.now().Sub(s.onOwnClock(at))
		if age < 2*time.Second || age > 3*time.Second {
			t.Errorf("skew %s: a heartbeat seen 2s ago is %s old on the node's clock", skew, age)
		}
	}
}
