package p2p

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestTraceHook: the hook of the receiving host sees a heads announcement
// enter validation and then be delivered, with its topic and data, and the
// pubsub stream of a new peer open; a host without a hook reports nothing.
func TestTraceHook(t *testing.T) {
	type event struct {
		self         peer.ID
		ev, topic    string
		announcement bool
	}
	var mu sync.Mutex
	var seen []event
	hook := func(self peer.ID, ev, topic string, data []byte) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, event{self, ev, topic, bytes.Contains(data, []byte("traced-heads"))})
	}
	count := func(f func(event) bool) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, e := range seen {
			if f(e) {
				n++
			}
		}
		return n
	}

	a, b, oa, ob, _ := ptPairCfg(t, Config{}, Config{Trace: hook})
	got := make(chan struct{}, 1)
	ob.OnHeads(func(peer.ID, []byte) { got <- struct{}{} })
	ptConnect(t, a, b)
	ptWaitTopicPeer(t, oa.ledgerTopic, b.ID())
	ptEventually(t, 10*time.Second, "b's hook sees a's stream open", func() bool {
		return count(func(e event) bool { return e.self == b.ID() && e.ev == TracePeerAdd }) > 0
	})
	publish := func(payload string) {
		t.Helper()
		if err := oa.PublishHeads(context.Background(), []byte(payload)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("b did not get %q", payload)
		}
	}
	publish("traced-heads")
	at := func(ev string) int {
		return count(func(e event) bool {
			return e.self == b.ID() && e.ev == ev && e.topic == TopicLedger(ptOrg) && e.announcement
		})
	}
	ptEventually(t, 10*time.Second, "b's hook sees the announcement validated and delivered", func() bool {
		return at(TraceValidate) == 1 && at(TraceDeliver) == 1
	})

	if n := count(func(e event) bool { return e.self == a.ID() }); n != 0 {
		t.Fatalf("host a has no hook, yet %d events were reported for it", n)
	}
}
