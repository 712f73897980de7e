package p2p

import (
	"context"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A host's gossip messages carry an author of its process, not its peer
// ID: a restarted process (same key) that is offered its previous
// process's messages must not take them for forgeries of its own and
// penalise the honest peer that relays them (GossipSub's self-origin
// rejection counts as an invalid delivery).
func TestGossipAuthorIsPerProcess(t *testing.T) {
	a := ptHost(t, nil)
	kb := ptKey(t)
	ta, err := a.ps.Join("author-test")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := ta.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Cancel()
	from := func(b *Host) peer.ID {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		tb, err := b.ps.Join("author-test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Subscribe(); err != nil { // announce the topic to a
			t.Fatal(err)
		}
		ptConnect(t, b, a)
		ptWaitTopicPeer(t, tb, a.ID())
		if err := tb.Publish(ctx, []byte(b.ID().String()+time.Now().String())); err != nil {
			t.Fatal(err)
		}
		m, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return peer.ID(m.GetFrom())
	}
	b1 := ptHostKey(t, kb, nil)
	f1 := from(b1)
	if f1 == b1.ID() {
		t.Fatalf("gossip author is the host's own ID %s", f1)
	}
	b1.Close()
	b2 := ptHostKey(t, kb, nil)
	if f2 := from(b2); f2 == f1 || f2 == b2.ID() {
		t.Fatalf("a restarted host authors as %s (before: %s, its ID %s)", f2, f1, b2.ID())
	}
}
