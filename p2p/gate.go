package p2p

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	ma "github.com/multiformats/go-multiaddr"
)

// The closed org (issue 20). Once this host has joined an org (JoinOrg),
// a peer may talk to it only as far as its standing in the org allows:
//
//   - a machine of the org (Membership: approved or pending);
//   - a joiner: a peer that proved, over AdmitProtocol, that it holds a
//     current org key or a usable invite, for JoinWindow;
//   - a former machine: one that is removed or rejected (Former); it may
//     sync, and the node serves it only the entry that put it out and that
//     entry's ancestors (SyncHorizon), so that it learns it is out, and
//     nothing written since; it keeps its connection for DepartGrace from
//     when it was first seen out (a departing machine: one that was a
//     machine while connected), and is told that entry then (OnFormer);
//   - a stranger: anyone else.
//
// The Gate enforces that at three points. (1) Connections: a connection
// gater refuses peers that failed admission or were cut off, for a while
// (BlockFor after AdmitTries refused admissions, StrangerBlock), unless
// they are machines of the org; and a sweep every SweepEvery closes the connections of strangers older than
// Probation (time enough to prove a capability) and of departing machines
// after their grace. (2) Streams: every inbound stream's protocol is
// checked when it is negotiated (the resource manager's SetProtocol, so it
// covers every protocol, the dataset exchange's too): see streamNeed.
// (3) Gossip: a peer that is neither a machine nor a joiner (a stranger,
// a former machine) has an application score of StrangerScore: below the publish and gossip
// thresholds, so this host's pubsub sends it nothing (no message, flood
// published or forwarded, no IHAVE, no IWANT answer) and keeps it out of
// every mesh, yet above the graylist, so what it sends is still validated
// (and rejected). The score follows the ledger at once: a machine this
// node learns of a moment after it connected gets gossip from then on.
// Every topic of the org but the ledger's (heartbeats, offers) is for
// approved machines only: joiners and pending machines need the ledger
// (to register, and to learn that they were approved) and nothing else.
// Flood publishing sends to every peer pubsub lists as a subscriber whose
// score is above the publish threshold, so the subscription filter is what
// keeps a topic from a peer: it takes a subscription to the ledger topic
// from machines, joiners and peers within their probation (a machine this
// node lags behind on), and to the others from approved machines only; the
// peer filter keeps the same peers out of each topic's mesh and gossip.
// Pubsub learns a peer's subscriptions only when the peer announces them
// (on connecting, and on joining a topic), so a refused subscription is
// remembered, and once the peer may have that topic (a pending machine
// approved, a machine this node lagged behind on) the sweep closes its
// connection and dials it again: the new connection's hello announces its
// subscriptions anew (resetRefused).
//
// Before the host has joined an org the gate is open: such a node holds
// nothing of an org, and is itself the joiner.

// Gate timings (variables for tests; a host takes them when it starts).
var (
	Probation     = 10 * time.Second
	AdmitTries    = 3 // refused admissions within BlockFor before the gater refuses the peer
	JoinWindow    = 10 * time.Minute
	DepartGrace   = 30 * time.Second
	BlockFor      = time.Minute
	StrangerBlock = 30 * time.Second
	SweepEvery    = time.Second
)

// need is what a peer must be for something.
type need int

const (
	needNothing  need = iota // anyone connected
	needSync                 // machine, joiner, departing or former machine
	needJoiner               // machine or joiner
	needMachine              // machine: approved or pending
	needApproved             // approved machine
)

// Gate is a host's admission policy; see the comment at the top of gate.go.
type Gate struct {
	h     *Host
	t     gateTimings
	holds atomic.Pointer[func() bool] // see HoldsOrg

	mu        sync.Mutex
	joiners   map[peer.ID]time.Time       // admitted joiner -> until
	departing map[peer.ID]time.Time       // departing machine -> until
	members   map[peer.ID]bool            // connected peers that were machines at the last sweep
	blocked   map[peer.ID]time.Time       // refused until
	refusals  map[peer.ID][]time.Time     // refused admissions, within blockFor
	subs      map[peer.ID]map[string]bool // connected peers' refused subscriptions (org topics)
	rejoins   map[peer.ID]bool            // admitted joiners that were former machines then
	told      map[peer.ID]bool            // connected former machines OnFormer was called for
	onFormer  func(peer.ID)
	onReset   func(peer.ID)
}

type gateTimings struct {
	probation, joinWindow, departGrace, blockFor, strangerBlock, sweepEvery time.Duration
}

func newGate(h *Host) *Gate {
	return &Gate{h: h,
		t: gateTimings{probation: Probation, joinWindow: JoinWindow, departGrace: DepartGrace,
			blockFor: BlockFor, strangerBlock: StrangerBlock, sweepEvery: SweepEvery},
		joiners:   map[peer.ID]time.Time{},
		departing: map[peer.ID]time.Time{},
		members:   map[peer.ID]bool{},
		blocked:   map[peer.ID]time.Time{},
		refusals:  map[peer.ID][]time.Time{},
		subs:      map[peer.ID]map[string]bool{},
		rejoins:   map[peer.ID]bool{},
		told:      map[peer.ID]bool{},
	}
}

// memberships are the Memberships of the orgs this host has joined.
func (h *Host) memberships() map[string]Membership {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]Membership, len(h.orgs))
	for name, o := range h.orgs {
		out[name] = o.m
	}
	return out
}

// HoldsOrg tells the gate how to know that the node holds an org's ledger
// before it has joined the org's topics (at start, and in a join between
// fetching the ledger and JoinOrg): the gate is then closed to everyone but
// for what anyone may use (admission, witness, tombstones, libp2p's own).
func (g *Gate) HoldsOrg(fn func() bool) { g.holds.Store(&fn) }

// open: no org joined and none held, nothing to guard.
func (g *Gate) open() bool {
	if !g.joinedNone() {
		return false
	}
	fn := g.holds.Load()
	return fn == nil || !(*fn)()
}

// joinedNone: the host has joined no org.
func (g *Gate) joinedNone() bool {
	g.h.mu.Lock()
	defer g.h.mu.Unlock()
	return len(g.h.orgs) == 0
}

func (g *Gate) isMachine(p peer.ID) bool {
	for _, m := range g.h.memberships() {
		if m.IsMachine(p) {
			return true
		}
	}
	return false
}

func (g *Gate) isApproved(p peer.ID) bool {
	for _, m := range g.h.memberships() {
		if m.IsApproved(p) {
			return true
		}
	}
	return false
}

// Former is optionally implemented by a Membership: IsFormer reports a
// removed or rejected machine of the org (see the comment at the top of
// gate.go).
type Former interface {
	IsFormer(id peer.ID) bool
}

func (g *Gate) isFormer(p peer.ID) bool {
	for _, m := range g.h.memberships() {
		if f, ok := m.(Former); ok && f.IsFormer(p) {
			return true
		}
	}
	return false
}

// IsJoiner reports whether p is an admitted joiner now.
func (g *Gate) IsJoiner(p peer.ID) bool { return g.isJoiner(p, time.Now()) }

// isJoiner: p was admitted within JoinWindow, and is not a machine removed
// or rejected since (a removed machine admitted to join again is a joiner).
func (g *Gate) isJoiner(p peer.ID, now time.Time) bool {
	if !g.until(g.joiners, p, now) {
		return false
	}
	g.mu.Lock()
	rejoin := g.rejoins[p]
	g.mu.Unlock()
	return rejoin || !g.isFormer(p)
}

// OnFormer registers fn, called (on its own goroutine) once per connection
// of a former machine, when the sweep first sees it connected and out: the
// node tells it the entry that put it out, which it fetches at once.
func (g *Gate) OnFormer(fn func(peer.ID)) {
	g.mu.Lock()
	g.onFormer = fn
	g.mu.Unlock()
}

// OnReset registers fn, called once a peer whose refused subscription is
// now allowed has been reconnected (resetRefused): what was published to
// it before it was let into a topic, it never got, and a publisher that
// republishes (offers) can send it again.
func (g *Gate) OnReset(fn func(peer.ID)) {
	g.mu.Lock()
	g.onReset = fn
	g.mu.Unlock()
}

func (g *Gate) until(set map[peer.ID]time.Time, p peer.ID, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := set[p]
	return ok && now.Before(t)
}

// allows says whether p meets n now.
func (g *Gate) allows(p peer.ID, n need) bool {
	if n == needNothing || p == g.h.ID() || g.open() {
		return true
	}
	now := time.Now()
	switch n {
	case needApproved:
		return g.isApproved(p)
	case needJoiner:
		return g.isMachine(p) || g.isJoiner(p, now)
	case needMachine:
		return g.isMachine(p)
	default: // needSync
		return g.isMachine(p) || g.isJoiner(p, now) || g.until(g.departing, p, now) || g.isFormer(p)
	}
}

// Admitted records that p proved a capability: it is a joiner for
// JoinWindow (while it is not removed or rejected after this: see
// isJoiner), and no longer blocked.
func (g *Gate) admitted(p peer.ID) {
	rejoin := g.isFormer(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.joiners[p] = time.Now().Add(g.t.joinWindow)
	g.rejoins[p] = rejoin
	delete(g.blocked, p)
}

// refusedAdmission closes p's connections after an admission refused at
// now, and refuses p for BlockFor once it was refused AdmitTries times
// within BlockFor (a joiner that got a key wrong may try the right one at
// once; one that keeps trying keys is shut out). A refusal is carried out a
// moment after it is answered (once the joiner has read it): when p was
// admitted on another stream since, that admission stands and nothing is
// cut (node TestWitnessExpiredInvite: a late cut reset the catch-up of a
// joiner admitted with the right key a moment after a refusal).
func (g *Gate) refusedAdmission(p peer.ID, now time.Time) {
	g.mu.Lock()
	if until, ok := g.joiners[p]; ok && until.Add(-g.t.joinWindow).After(now) {
		g.mu.Unlock()
		return
	}
	ts := g.refusals[p]
	for len(ts) > 0 && now.Sub(ts[0]) > g.t.blockFor {
		ts = ts[1:]
	}
	ts = append(ts, now)
	block := len(ts) >= AdmitTries
	if block {
		ts = nil
	}
	if len(g.refusals) < maxBlocked {
		g.refusals[p] = ts
	}
	g.mu.Unlock()
	if block {
		g.cut(p, g.t.blockFor)
	} else {
		g.cut(p, 0)
	}
}

// maxBlocked bounds the peers refused at once (each cost its sender a
// connection; past the bound a cut peer is only disconnected).
const maxBlocked = 1 << 16

// cut closes p's connections and refuses it for d (unless it is, or
// becomes, a machine of the org).
func (g *Gate) cut(p peer.ID, d time.Duration) {
	g.mu.Lock()
	if d > 0 && len(g.blocked) < maxBlocked {
		g.blocked[p] = time.Now().Add(d)
	}
	delete(g.joiners, p)
	delete(g.rejoins, p)
	g.mu.Unlock()
	_ = g.h.h.Network().ClosePeer(p)
}

// IsBlocked reports whether the gater refuses p now.
func (g *Gate) IsBlocked(p peer.ID) bool {
	if !g.until(g.blocked, p, time.Now()) {
		return false
	}
	return !g.isMachine(p)
}

// Gate returns the host's admission policy.
func (h *Host) Gate() *Gate { return h.gate }

// streamNeed is what the remote peer of an inbound stream of proto must be.
func streamNeed(proto protocol.ID) need {
	switch {
	case proto == AdmitProtocol, proto == WitnessProtocol, proto == TombstoneProtocol:
		// Admission and witnessing check the capability the request
		// carries; a tombstone says only that an org is gone, and is asked
		// by machines of a deleted org (no longer machines of anything).
		return needNothing
	case strings.HasPrefix(string(proto), "/ipfs/id/"), strings.HasPrefix(string(proto), "/ipfs/ping/"),
		strings.HasPrefix(string(proto), "/meshsub/"), strings.HasPrefix(string(proto), "/floodsub/"):
		// libp2p's own; pubsub is filtered per topic (subscriptions).
		return needNothing
	case proto == autoNATv2DialBack:
		// AutoNAT v2's dial-back comes from the asked machine's dialer, a
		// peer of its own, and carries only the nonce this host sent.
		return needNothing
	case proto == SyncProtocol, proto == CheckpointProtocol:
		return needSync
	case proto == HeartbeatProtocol:
		return needApproved // as the heartbeat topic
	}
	// Logs, the dataset exchange, AutoNAT's dial requests, the relay
	// (reserve, connect, and the relay's own stop stream), hole punching
	// (DCUtR), and anything else: approved machines.
	return needApproved
}

// orgTopic splits "/cshare/<org>/<kind>"; ok is false for other topics.
func orgTopic(topic string) (org, kind string, ok bool) {
	rest, found := strings.CutPrefix(topic, "/cshare/")
	if !found {
		return "", "", false
	}
	org, kind, ok = strings.Cut(rest, "/")
	return org, kind, ok && org != ""
}

// topicNeed is what a peer must be to have topic: nothing for topics of
// orgs this host is not in.
func (g *Gate) topicNeed(topic string) need {
	org, kind, ok := orgTopic(topic)
	if !ok {
		return needNothing
	}
	g.h.mu.Lock()
	_, mine := g.h.orgs[org]
	g.h.mu.Unlock()
	switch {
	case !mine:
		return needNothing
	case kind == KindLedger:
		return needJoiner
	case kind == kindOffers:
		// A registered machine, pending too: a newcomer sees the market
		// it joined (issue 18: "a newcomer gets the current ones on
		// join") while an admin decides; offers carry no job, log or
		// member detail.
		return needMachine
	}
	return needApproved // heartbeats, and any other
}

// peerFilter is pubsub's WithPeerFilter.
func (g *Gate) peerFilter(p peer.ID, topic string) bool { return g.allows(p, g.topicNeed(topic)) }

// maxSubsPerRPC caps the subscriptions of one RPC.
const maxSubsPerRPC = 256

// subFilter is pubsub's WithSubscriptionFilter.
type subFilter struct{ g *Gate }

func (subFilter) CanSubscribe(string) bool { return true }

func (f subFilter) FilterIncomingSubscriptions(from peer.ID, subs []*pb.RPC_SubOpts) ([]*pb.RPC_SubOpts, error) {
	if len(subs) > maxSubsPerRPC {
		return nil, pubsub.ErrTooManySubscriptions
	}
	out := subs[:0:0]
	for _, s := range subs {
		topic := s.GetTopicid()
		n := f.g.topicNeed(topic)
		if s.GetSubscribe() && !f.g.allows(from, n) && (n > needJoiner || !f.g.young(from, time.Now())) {
			f.g.refusedSub(from, topic)
			continue
		}
		if n != needNothing {
			f.g.forgetSub(from, topic)
		}
		out = append(out, s)
	}
	return out, nil
}

// maxRefusedSubs bounds the refused subscriptions remembered per peer
// (only the org's topics are: three per org).
const maxRefusedSubs = 16

// refusedSub remembers that p's subscription to topic was refused.
func (g *Gate) refusedSub(p peer.ID, topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ts := g.subs[p]
	if ts == nil {
		if len(g.subs) >= maxBlocked {
			return
		}
		ts = map[string]bool{}
		g.subs[p] = ts
	}
	if len(ts) < maxRefusedSubs {
		ts[topic] = true
	}
}

// forgetSub: p's (un)subscription to topic was taken.
func (g *Gate) forgetSub(p peer.ID, topic string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if ts := g.subs[p]; ts != nil {
		delete(ts, topic)
		if len(ts) == 0 {
			delete(g.subs, p)
		}
	}
}

// resetRefused closes the connections of p, a peer that now may have a
// topic whose subscription was refused, and dials it again (see the
// comment at the top of gate.go).
func (g *Gate) resetRefused(p peer.ID) {
	g.mu.Lock()
	topics := make([]string, 0, len(g.subs[p]))
	for topic := range g.subs[p] {
		topics = append(topics, topic)
	}
	g.mu.Unlock()
	i := slices.IndexFunc(topics, func(t string) bool { return g.allows(p, g.topicNeed(t)) })
	if i < 0 {
		return
	}
	g.mu.Lock()
	delete(g.subs, p)
	g.mu.Unlock()
	g.h.log.Info("reconnecting to a peer that may now have a topic it was refused", "peer", p, "topic", topics[i])
	go func() {
		ctx, cancel := context.WithTimeout(g.h.ctx, 10*time.Second)
		defer cancel()
		if g.h.ResetPeer(ctx, p, nil) != nil {
			return
		}
		g.mu.Lock()
		fn := g.onReset
		g.mu.Unlock()
		if fn != nil {
			fn(p)
		}
	}()
}

// StrangerScore is the application score of a peer that is neither a
// machine nor a joiner (see
// the comment at the top of gate.go): between the publish threshold and the
// graylist threshold of peerScoreThresholds.
const StrangerScore = -2000

// appScore is the gate's part of pubsub's application score.
func (g *Gate) appScore(p peer.ID) float64 {
	if g.allows(p, needJoiner) {
		return 0
	}
	return StrangerScore
}

// young: p's oldest connection is within its probation.
func (g *Gate) young(p peer.ID, now time.Time) bool {
	oldest := now
	for _, c := range g.h.h.Network().ConnsToPeer(p) {
		if o := c.Stat().Opened; !o.IsZero() && o.Before(oldest) {
			oldest = o
		}
	}
	return now.Sub(oldest) < g.t.probation
}

// Connection gater (connmgr.ConnectionGater).

func (g *Gate) InterceptPeerDial(p peer.ID) bool            { return !g.IsBlocked(p) }
func (g *Gate) InterceptAccept(network.ConnMultiaddrs) bool { return true }

// InterceptAddrDial refuses a dial through a relay that is not an approved
// machine of the org (nat.go): no relay outside the org is used.
func (g *Gate) InterceptAddrDial(_ peer.ID, a ma.Multiaddr) bool {
	r, ok := relayOf(a)
	return !ok || g.relayUsable(r)
}
func (g *Gate) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }
func (g *Gate) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return !g.IsBlocked(p)
}

// sweepLoop runs sweep every SweepEvery until the host closes.
func (g *Gate) sweepLoop() {
	t := time.NewTicker(g.t.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-g.h.ctx.Done():
			return
		case <-t.C:
			g.sweep(time.Now())
		}
	}
}

// sweep closes the connections of peers that may no longer stay, starts
// departing machines' grace, and forgets what it kept of gone peers.
func (g *Gate) sweep(now time.Time) {
	if g.joinedNone() {
		return
	}
	nw := g.h.h.Network()
	connected := map[peer.ID]bool{}
	for _, p := range nw.Peers() {
		connected[p] = true
		machine := g.isMachine(p)
		former := !machine && g.isFormer(p)
		g.mu.Lock()
		was := g.members[p]
		g.members[p] = machine
		_, hadDep := g.departing[p]
		if machine {
			delete(g.departing, p)
			delete(g.told, p)
		} else if was || former && !hadDep {
			g.departing[p] = now.Add(g.t.departGrace)
		}
		dep, isDep := g.departing[p]
		join, isJoin := g.joiners[p]
		isJoin = isJoin && (!former || g.rejoins[p]) // see isJoiner
		tell := former && !g.told[p] && g.onFormer != nil
		if tell {
			g.told[p] = true
		}
		onFormer, refused := g.onFormer, len(g.subs[p]) > 0
		g.mu.Unlock()
		if tell {
			go onFormer(p)
		}
		if refused {
			g.resetRefused(p)
		}
		switch {
		case machine, isJoin && now.Before(join), isDep && now.Before(dep):
			continue
		case isDep:
			g.mu.Lock()
			delete(g.departing, p)
			g.mu.Unlock()
			g.h.log.Info("closing the connections of a machine that left the org", "peer", p)
			g.cut(p, 0)
			continue
		}
		if !g.young(p, now) {
			g.h.log.Info("closing the connections of a peer that is not in the org", "peer", p)
			g.cut(p, g.t.strangerBlock)
		}
	}
	g.mu.Lock()
	for _, set := range []map[peer.ID]bool{g.members, g.told} {
		for p := range set {
			if !connected[p] {
				delete(set, p)
			}
		}
	}
	for p := range g.subs {
		if !connected[p] {
			delete(g.subs, p)
		}
	}
	for p, ts := range g.refusals {
		if !connected[p] && (len(ts) == 0 || now.Sub(ts[len(ts)-1]) > g.t.blockFor) {
			delete(g.refusals, p)
		}
	}
	for _, set := range []map[peer.ID]time.Time{g.joiners, g.departing, g.blocked} {
		for p, t := range set {
			if !now.Before(t) {
				delete(set, p)
			}
		}
	}
	for p := range g.rejoins {
		if _, ok := g.joiners[p]; !ok {
			delete(g.rejoins, p)
		}
	}
	g.mu.Unlock()
}
