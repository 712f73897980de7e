package p2p

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

func TestLiveness(t *testing.T) {
	ka, kb := ptKey(t), ptKey(t)
	a, _ := peer.IDFromPrivateKey(ka)
	b, _ := peer.IDFromPrivateKey(kb)
	t0 := time.Unix(1_700_000_000, 0)
	var l Liveness
	if l.Online(a, t0, time.Second) {
		t.Fatal("unknown machine online")
	}
	l.Observe(Heartbeat{Machine: a.String(), Seq: 5, Interval: 10_000}, t0)
	l.Observe(Heartbeat{Machine: a.String(), Seq: 4}, t0.Add(time.Second)) // older: ignored
	hb, at, ok := l.Last(a)
	if !ok || hb.Seq != 5 || !at.Equal(t0) {
		t.Fatalf("Last = %v %v %v", hb.Seq, at, ok)
	}
	l.Observe(Heartbeat{Machine: a.String(), Seq: 5, Interval: 10_000}, t0.Add(2*time.Second)) // same seq, later
	if _, at, _ := l.Last(a); !at.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("same seq later not kept: %v", at)
	}
	l.Observe(Heartbeat{Machine: a.String(), Seq: 5}, t0) // same seq, earlier: keeps later time
	if _, at, _ := l.Last(a); !at.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("earlier time overwrote: %v", at)
	}
	seenAt := t0.Add(2 * time.Second)
	// Online: within 3 intervals of the last heartbeat.
	if !l.Online(a, seenAt.Add(30*time.Second), 10*time.Second) {
		t.Fatal("offline at exactly 3 intervals")
	}
	if l.Online(a, seenAt.Add(30*time.Second+time.Millisecond), 10*time.Second) {
		t.Fatal("online after 3 intervals")
	}
	// interval 0: the machine's announced interval (10 s).
	if !l.Online(a, seenAt.Add(29*time.Second), 0) || l.Online(a, seenAt.Add(31*time.Second), 0) {
		t.Fatal("announced interval not used")
	}
	// Neither given: DefaultInterval.
	l.Observe(Heartbeat{Machine: b.String(), Seq: 1}, t0)
	if !l.Online(b, t0.Add(3*DefaultInterval), 0) || l.Online(b, t0.Add(3*DefaultInterval+1), 0) {
		t.Fatal("default interval not used")
	}
	all := l.All()
	if len(all) != 2 || all[0].Heartbeat.Machine > all[1].Heartbeat.Machine {
		t.Fatalf("All = %+v", all)
	}
	l.Forget(a)
	if _, _, ok := l.Last(a); ok || len(l.All()) != 1 {
		t.Fatal("Forget")
	}
}
