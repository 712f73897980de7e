package p2p

import (
	"slices"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The org's delivery loops: heads and heartbeats handed to the node, and
// the beat (heartbeat) scheduling.

func (o *Org) ledgerLoop() {
	defer o.wg.Done()
	self := o.h.ID()
	for {
		msg, err := o.ledgerSub.Next(o.ctx)
		if err != nil {
			return
		}
		d, ok := msg.ValidatorData.(headsDelivery)
		if !ok || d.from == self {
			continue
		}
		from, payload := d.from, d.payload
		o.mu.Lock()
		fns := o.headsFns
		o.mu.Unlock()
		for _, fn := range fns {
			fn(from, payload)
		}
	}
}

func (o *Org) heartbeatLoop() {
	defer o.wg.Done()
	for {
		msg, err := o.hbSub.Next(o.ctx)
		if err != nil {
			return
		}
		hb, ok := msg.ValidatorData.(Heartbeat)
		if !ok {
			continue
		}
		o.remember(hb, msg.GetData(), time.Now())
		o.mu.Lock()
		fns := o.hbFns
		o.mu.Unlock()
		for _, fn := range fns {
			fn(hb)
		}
	}
}

// remember keeps hb (verified) as the latest of its machine if it is newer.
func (o *Org) remember(hb Heartbeat, raw []byte, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.cache[hb.Machine]; ok && cur.hb.Seq >= hb.Seq {
		return
	}
	o.cache[hb.Machine] = cachedHB{hb: hb, raw: append([]byte(nil), raw...), at: at}
}

func (o *Org) eventLoop() {
	defer o.wg.Done()
	for {
		ev, err := o.events.NextPeerEvent(o.ctx)
		if err != nil {
			return
		}
		if ev.Type == pubsub.PeerJoin {
			o.mu.Lock()
			o.joined[ev.Peer] = struct{}{}
			o.mu.Unlock()
			o.kickBeat()
		}
	}
}

func (o *Org) kickBeat() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.beat == nil || o.beatTimer != nil || o.closed {
		return
	}
	delay := time.Until(o.lastBeat.Add(BeatMinGap))
	if delay < 0 {
		delay = 0
	}
	o.beatTimer = time.AfterFunc(delay, o.runBeat)
}

// beatReadyWait bounds how long a beat waits for pubsub to be able to send
// to the peers that triggered it.
const beatReadyWait = 3 * time.Second

func (o *Org) runBeat() {
	// Pubsub learns a peer's subscriptions (and reports PeerJoin) possibly
	// before its own stream to that peer is open, and until then silently
	// drops what it would send there. Wait until the peers that joined are
	// listed as sendable (ListPeers), so the beat reaches them.
	o.mu.Lock()
	pending := make([]peer.ID, 0, len(o.joined))
	for p := range o.joined {
		pending = append(pending, p)
	}
	clear(o.joined)
	o.mu.Unlock()
	deadline := time.Now().Add(beatReadyWait)
	for len(pending) > 0 && time.Now().Before(deadline) {
		ready := map[peer.ID]bool{}
		for _, p := range o.hbTopic.ListPeers() {
			ready[p] = true
		}
		pending = slices.DeleteFunc(pending, func(p peer.ID) bool { return ready[p] })
		if len(pending) == 0 {
			break
		}
		select {
		case <-o.ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}

	o.mu.Lock()
	fn := o.beat
	o.beatTimer = nil
	o.lastBeat = time.Now()
	closed := o.closed
	more := len(o.joined) > 0 // joined while we waited
	o.mu.Unlock()
	if fn == nil || closed {
		return
	}
	fn()
	if more {
		o.kickBeat()
	}
}
