package p2p

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// GossipWriter follows GossipSub's writer to a peer: there once the peer
// connects, gone when the connection closes, and back after ResetPeer
// (which the node uses when a connected machine has none), with heartbeats
// passing again.
func TestGossipWriterAndResetPeer(t *testing.T) {
	a, b, oa, ob, _ := ptPair(t)
	var got atomic.Int64
	oa.OnHeartbeat(func(hb Heartbeat) {
		if hb.Machine == b.ID().String() {
			got.Add(1)
		}
	})
	ptConnect(t, a, b)
	ptEventually(t, 10*time.Second, "a writer to b", func() bool { return a.GossipWriter(b.ID()) })
	if a.GossipWriter(a.ID()) {
		t.Fatal("a writer to itself")
	}

	_ = a.h.Network().ClosePeer(b.ID())
	ptEventually(t, 10*time.Second, "the writer to b gone with the connection", func() bool {
		return !a.Connected(b.ID()) && !a.GossipWriter(b.ID())
	})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.ResetPeer(ctx, b.ID(), b.Addrs()); err != nil {
		t.Fatal(err)
	}
	ptEventually(t, 10*time.Second, "a writer to b after ResetPeer", func() bool { return a.GossipWriter(b.ID()) })
	ptEventually(t, 10*time.Second, "b's heartbeat at a after ResetPeer", func() bool {
		_ = ob.PublishHeartbeat(ctx, Heartbeat{Interval: 1000})
		return got.Load() > 0
	})
}
