package node

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/ledger/replica"
	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/node/events"
	"github.com/cshare/cshare/p2p"
)

// eventState is the node's event bus (node/events, docs/design.md §26)
// and what feeds it: the tracker that derives events from the ledger and
// from liveness, and the machines whose every connection closed.
type eventState struct {
	bus      *events.Bus
	self     string
	interval time.Duration
	started  time.Time
	now      func() time.Time
	// liveness is the peer service's (set once it is built, before loop
	// starts).
	liveness func(id string, now time.Time) (p2p.Heartbeat, time.Time, bool)

	notify *events.Notifier // node.yaml's notify: webhooks (nil: none)

	mu      sync.Mutex // guards tracker: the ledger's notifications and the liveness loop
	tracker events.Tracker
	downMu  sync.Mutex
	down    map[string]time.Time // machines with no connection left, since when
	wake    chan struct{}
}

func newEventState(self string, interval time.Duration, started time.Time, now func() time.Time) *eventState {
	return &eventState{bus: events.NewBus(now), self: self, interval: interval, started: started, now: now,
		down: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// notifyTo posts the events this node sends to node.yaml's webhooks.
func (ev *eventState) notifyTo(hooks []config.Notify, reg prometheus.Registerer, log *slog.Logger) {
	if len(hooks) == 0 {
		return
	}
	ws := make([]events.Webhook, len(hooks))
	for i, h := range hooks {
		ws[i] = events.Webhook{URL: h.Webhook, Events: h.Events}
	}
	ev.notify = events.NewNotifier(ws, reg, 0, log)
	ev.bus.OnPublishOf(ev.notify.Wants, ev.notify.Offer)
}

// baseline takes the ledger as it is at start as seen: no events for what
// happened before.
func (ev *eventState) baseline(rep *replica.Replica) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	rep.View(ev.tracker.Baseline)
}

// ledger publishes the events of entries just added to rep. (The first
// call after the node joined an org takes the ledger as the tracker's
// baseline: what was there before is not news.)
func (ev *eventState) ledger(rep *replica.Replica, es []*ledger.Entry) {
	if rep == nil {
		return
	}
	var b *events.Batch
	ev.mu.Lock()
	rep.View(func(st *ledger.State) { b = ev.tracker.Ledger(st, es, ev.self) })
	ev.mu.Unlock()
	ev.bus.PublishBatch(b)
}

// watchConnections records when this node loses its last connection to a
// peer, and when it has one again: a machine killed outright is offline
// for the events (not for dispatch) once it has been silent for grace
// after its connections closed, well before the 3 intervals that make it
// offline by heartbeats alone.
func (ev *eventState) watchConnections(nw network.Network) {
	nw.Notify(&network.NotifyBundle{
		ConnectedF: func(_ network.Network, c network.Conn) {
			ev.downMu.Lock()
			delete(ev.down, c.RemotePeer().String())
			ev.downMu.Unlock()
		},
		DisconnectedF: func(nw network.Network, c network.Conn) {
			if nw.Connectedness(c.RemotePeer()) == network.Connected {
				return
			}
			ev.downMu.Lock()
			ev.down[c.RemotePeer().String()] = ev.now()
			ev.downMu.Unlock()
			signal(ev.wake)
		},
	})
}

// grace is how long a machine whose connections all closed may stay
// silent before the events call it offline: a heartbeat period (at most
// an interval) and a quarter, so a machine that lost its direct
// connection but still beats through the org's gossip is not.
func (ev *eventState) grace() time.Duration { return ev.interval + ev.interval/4 }

// loop derives machine.online, machine.offline and contract.ending from
// liveness every quarter interval (at most every second), and a grace
// after a connection closes, until ctx ends.
func (ev *eventState) loop(ctx context.Context, rep *replica.Replica) {
	tick := time.NewTicker(min(max(ev.interval/4, 50*time.Millisecond), time.Second))
	defer tick.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-retry:
		case <-ev.wake:
			retry = time.After(ev.grace()) // look again when the grace is over
		}
		ev.peerEvents(rep, ev.now())
	}
}

// peerEvents publishes what changed in liveness at now.
func (ev *eventState) peerEvents(rep *replica.Replica, now time.Time) {
	grace := ev.grace()
	ev.downMu.Lock()
	down := make(map[string]time.Time, len(ev.down))
	for id, t := range ev.down {
		down[id] = t
	}
	ev.downMu.Unlock()
	online := func(id string) bool {
		_, at, ok := ev.liveness(id, now)
		return ok && !silentSince(down, id, at, now, grace)
	}
	quiet := now.Sub(ev.started) < 3*ev.interval // not yet heard from every peer
	var evs []events.Event
	ev.mu.Lock()
	rep.View(func(st *ledger.State) { evs = ev.tracker.Peers(st, online, ev.self, now, quiet) })
	ev.mu.Unlock()
	ev.bus.Publish(evs...)
}

// silentSince: machine id lost its every connection at least grace before
// now and has sent no heartbeat (its last at at) since.
func silentSince(down map[string]time.Time, id string, at, now time.Time, grace time.Duration) bool {
	d, lost := down[id]
	return lost && now.Sub(d) >= grace && !at.After(d)
}

// silent says whether the events call machine id offline at now while its
// heartbeats alone do not yet (silentSince): the status the API and the
// dashboard show follows, so that the page a machine.offline event
// refreshes says offline.
func (ev *eventState) silent(id string, now time.Time) bool {
	if ev == nil || ev.liveness == nil {
		return false
	}
	ev.downMu.Lock()
	d, lost := ev.down[id]
	ev.downMu.Unlock()
	if !lost {
		return false
	}
	_, at, _ := ev.liveness(id, now)
	return silentSince(map[string]time.Time{id: d}, id, at, now, ev.grace())
}
