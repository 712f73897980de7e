package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/internal/atomicfile"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// The market's offers (issue 18): gossiped on the org's offers topic, never
// written to the ledger. A host's node publishes its own offers at once and
// republishes them every offerRepublish while they are open, and at once
// when a peer subscribes to the topic (so a newcomer gets the current
// offers on join); every node keeps the offers it has heard from their
// host within offerStale, drops them at their end or on a signed
// withdrawal, and lists them with the market's query language.
const (
	offerRepublish = 10 * time.Second
	offerStale     = 6 * offerRepublish
	offersFile     = "offers.json" // this machine's own offers, republished after a restart
	reliabilityDay = 24 * time.Hour
)

type offerRec struct {
	so   ledger.SignedOffer
	o    market.Offer
	seen time.Time
}

// offerBook is the node's view of the org's offers, and the heartbeats it
// received per machine over the last day (for reliability).
type offerBook struct {
	mu        sync.Mutex
	topic     *p2p.Offers
	since     time.Time
	offers    map[string]offerRec
	withdrawn map[string]int64 // offer ID -> its end (ms): replays are dropped until then
	mine      map[string]ledger.SignedOffer
	beats     map[string][]time.Time
	kick      chan struct{} // a peer joined the topic: republish now
}

// offerResetDelay is how long after a reconnection the offers go again:
// time for the subscriptions to cross the new connection.
const offerResetDelay = 300 * time.Millisecond

func (b *offerBook) kickRepublish() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

func (n *Node) book() *offerBook {
	n.offerOnce.Do(func() {
		n.offerBk = &offerBook{since: n.now(), offers: map[string]offerRec{}, withdrawn: map[string]int64{},
			mine: map[string]ledger.SignedOffer{}, beats: map[string][]time.Time{}, kick: make(chan struct{}, 1)}
	})
	return n.offerBk
}

// joinOffers joins the org's offers topic and starts republishing this
// machine's offers (loaded from the data dir).
func (n *Node) joinOffers(org string, o *p2p.Org) error {
	b := n.book()
	t, err := n.host.JoinOffers(org, func(from peer.ID, m *p2p.OfferMsg) *p2p.OfferVerdict { return n.checkOffer(org, from, m) })
	if err != nil {
		return err
	}
	t.OnMessage(n.onOffer)
	t.OnPeerJoin(func(peer.ID) { b.kickRepublish() })
	// A machine let into the topic by its approval is reconnected (see
	// p2p.Gate.OnReset); its subscription comes with the new connection's
	// first message, a moment later, and GossipSub may report no join for a
	// peer that was reconnected at once: send it the offers then, not at
	// the next republication.
	n.host.Gate().OnReset(func(peer.ID) { time.AfterFunc(offerResetDelay, b.kickRepublish) })
	o.OnHeartbeat(func(hb p2p.Heartbeat) { b.beat(hb.Machine, n.now()) })
	b.mu.Lock()
	b.topic = t
	b.mu.Unlock()
	n.loadOffers(org)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tick := time.NewTicker(offerRepublish)
		defer tick.Stop()
		for {
			n.republishOffers()
			select {
			case <-n.ctx.Done():
				return
			case <-tick.C:
			case <-b.kick:
			}
		}
	}()
	return nil
}

// closeOffers leaves the offers topic.
func (n *Node) closeOffers() {
	b := n.book()
	b.mu.Lock()
	t := b.topic
	b.topic = nil
	b.mu.Unlock()
	if t != nil {
		t.Close()
	}
}

func (b *offerBook) beat(machine string, at time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts := b.beats[machine]
	i := 0
	for i < len(ts) && at.Sub(ts[i]) > reliabilityDay {
		i++
	}
	b.beats[machine] = append(ts[i:], at)
}

// reliability is the share of the last day's heartbeats (at interval) that
// this node received from machine, counted since it joined when that is
// less than a day ago.
func (b *offerBook) reliability(machine string, interval time.Duration, now time.Time) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, t := range b.beats[machine] {
		if now.Sub(t) <= reliabilityDay {
			n++
		}
	}
	window := min(reliabilityDay, now.Sub(b.since))
	expected := max(1, float64(window)/float64(interval))
	return min(1, float64(n)/expected)
}

// checkOffer is the offers topic's validator: the signature and org, an
// approved machine of the org that has what the offer includes, and an
// offer still open. Expired offers, and machines this node does not know
// yet, are ignored without penalty.
func (n *Node) checkOffer(org string, _ peer.ID, m *p2p.OfferMsg) *p2p.OfferVerdict {
	if m.Withdraw != nil {
		if err := m.Withdraw.Verify(org); err != nil {
			return &p2p.OfferVerdict{Reason: p2p.ReasonBadSignature}
		}
		return nil
	}
	o, err := m.Offer.Verify(org)
	switch {
	case errors.Is(err, ledger.ErrBadSignature):
		return &p2p.OfferVerdict{Reason: p2p.ReasonBadSignature}
	case err != nil:
		return &p2p.OfferVerdict{Reason: p2p.ReasonUndecodable}
	case !o.Live(n.now().UnixMilli()):
		return &p2p.OfferVerdict{Reason: "expired", Ignore: true}
	}
	var v *p2p.OfferVerdict
	n.snapshot(func(st *ledger.State) {
		switch m := st.Machines[o.Machine]; {
		case m == nil:
			v = &p2p.OfferVerdict{Reason: p2p.IgnoreLagging, Ignore: true} // we may lag behind its registration
		case m.Status != ledger.MachineApproved:
			v = &p2p.OfferVerdict{Reason: p2p.ReasonNotApproved}
		case st.CheckOffer(o) != nil:
			v = &p2p.OfferVerdict{Reason: "no_resource"}
		}
	})
	return v
}

func (n *Node) onOffer(m p2p.OfferMsg) {
	b := n.book()
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := m.Withdraw; w != nil {
		if r, ok := b.offers[w.Offer]; ok && r.o.Machine == w.Machine {
			delete(b.offers, w.Offer)
			b.withdrawn[w.Offer] = r.o.Until
		}
		return
	}
	o, err := m.Offer.Verify(n.orgID())
	if err != nil {
		return
	}
	if _, gone := b.withdrawn[o.ID]; gone {
		return
	}
	b.offers[o.ID] = offerRec{so: *m.Offer, o: o, seen: n.now()}
}

func (n *Node) republishOffers() {
	b := n.book()
	now := n.now()
	b.mu.Lock()
	t := b.topic
	var send []ledger.SignedOffer
	for id, so := range b.mine {
		if now.UnixMilli() >= so.Offer.Until {
			delete(b.mine, id)
			continue
		}
		send = append(send, so)
	}
	for id, r := range b.offers {
		if !r.o.Live(now.UnixMilli()) || now.Sub(r.seen) > offerStale {
			delete(b.offers, id)
		}
	}
	for id, until := range b.withdrawn {
		if now.UnixMilli() >= until {
			delete(b.withdrawn, id)
		}
	}
	b.mu.Unlock()
	if t == nil {
		return
	}
	sort.Slice(send, func(i, j int) bool { return send[i].Offer.ID < send[j].Offer.ID })
	for i := range send {
		ctx, c := context.WithTimeout(n.ctx, 5*time.Second)
		if err := t.Publish(ctx, p2p.OfferMsg{Offer: &send[i]}); err != nil && !errors.Is(err, context.Canceled) {
			n.log.Debug("could not publish an offer", "offer", send[i].Offer.ID, "err", err)
		}
		c()
	}
}

type offersOnDisk struct {
	Org    string               `json:"org"`
	Offers []ledger.SignedOffer `json:"offers"`
}

func (n *Node) saveOffers() {
	b := n.book()
	b.mu.Lock()
	d := offersOnDisk{Org: n.orgID()}
	for _, so := range b.mine {
		d.Offers = append(d.Offers, so)
	}
	b.mu.Unlock()
	sort.Slice(d.Offers, func(i, j int) bool { return d.Offers[i].Offer.ID < d.Offers[j].Offer.ID })
	data, err := json.Marshal(d)
	if err == nil {
		err = atomicfile.WriteFile(filepath.Join(n.opts.DataDir, offersFile), data, 0o600)
	}
	if err != nil {
		n.log.Warn("could not save this machine's offers", "err", err)
	}
}

func (n *Node) loadOffers(org string) {
	data, err := os.ReadFile(filepath.Join(n.opts.DataDir, offersFile))
	if err != nil {
		return
	}
	var d offersOnDisk
	if json.Unmarshal(data, &d) != nil || d.Org != org {
		return
	}
	b := n.book()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, so := range d.Offers {
		if o, err := so.Verify(org); err == nil && o.Machine == n.idStr {
			so.Offer.ID = o.ID
			b.mine[o.ID] = so
		}
	}
}

// CreateOffer signs an offer for part of this machine and publishes it.
func (n *Node) CreateOffer(ctx context.Context, req api.OfferCreate) (api.OfferInfo, error) {
	org := n.orgID()
	if org == "" {
		return api.OfferInfo{}, api.Errorf(http.StatusConflict, "this node is in no org: join one first (cshare node join --org-key KEY)")
	}
	var m *ledger.Machine
	n.snapshot(func(st *ledger.State) {
		if mm := st.Machines[n.idStr]; mm != nil && mm.Status == ledger.MachineApproved {
			c := *mm
			m = &c
		}
	})
	if m == nil {
		return api.OfferInfo{}, api.Errorf(http.StatusConflict, "this machine is not approved in the org: an admin approves it with cshare machine approve %s", n.idStr)
	}
	now := n.now()
	o, err := req.Offer(n.idStr, ledger.MarketHardware(m.Hardware), now.UnixMilli())
	if err != nil {
		return api.OfferInfo{}, err
	}
	so := n.signer.SignOffer(org, o)
	if _, err := so.Verify(org); err != nil {
		return api.OfferInfo{}, api.BadRequest(err)
	}
	b := n.book()
	b.mu.Lock()
	b.mine[so.Offer.ID] = so
	b.offers[so.Offer.ID] = offerRec{so: so, o: so.Offer, seen: now}
	t := b.topic
	b.mu.Unlock()
	n.saveOffers()
	if t != nil {
		if err := t.Publish(ctx, p2p.OfferMsg{Offer: &so}); err != nil {
			n.log.Warn("could not publish the offer now; it is republished every "+offerRepublish.String(), "err", err)
		}
	}
	return n.offerInfo(so.Offer, m.Name, now), nil
}

// Offers lists the open offers that match query, sorted by order.
func (n *Node) Offers(_ context.Context, query, order string) ([]api.OfferInfo, error) {
	q, err := market.ParseQuery(query)
	if err != nil {
		return nil, api.FieldErrorf(http.StatusBadRequest, "query", "%v", err)
	}
	orders, err := market.ParseOrder(order)
	if err != nil {
		return nil, api.FieldErrorf(http.StatusBadRequest, "order", "%v", err)
	}
	now := n.now()
	b := n.book()
	b.mu.Lock()
	recs := make([]offerRec, 0, len(b.offers))
	for _, r := range b.offers {
		if r.o.Live(now.UnixMilli()) && now.Sub(r.seen) <= offerStale {
			recs = append(recs, r)
		}
	}
	b.mu.Unlock()
	names := map[string]string{}
	n.snapshot(func(st *ledger.State) {
		for _, r := range recs {
			if m := st.Machines[r.o.Machine]; m != nil {
				names[r.o.Machine] = m.Name
			}
		}
	})
	ls := make([]market.Listing, len(recs))
	for i, r := range recs {
		ls[i] = market.Listing{Offer: r.o, MachineName: names[r.o.Machine], Reliability: b.reliability(r.o.Machine, n.interval, now)}
		if r.o.Machine == n.idStr {
			ls[i].Reliability = 1 // our own heartbeats are not received
		}
	}
	out := []api.OfferInfo{}
	for _, l := range market.Search(ls, q, orders, now.UnixMilli()) {
		info := n.offerInfo(l.Offer, l.MachineName, now)
		info.Reliability = l.Reliability
		out = append(out, info)
	}
	return out, nil
}

// RemoveOffer withdraws one of this machine's offers.
func (n *Node) RemoveOffer(ctx context.Context, id string) (api.OfferInfo, error) {
	b := n.book()
	b.mu.Lock()
	so, ok := b.mine[id]
	if ok {
		delete(b.mine, id)
		delete(b.offers, id)
		b.withdrawn[id] = so.Offer.Until
	}
	t := b.topic
	b.mu.Unlock()
	if !ok {
		return api.OfferInfo{}, api.Errorf(http.StatusNotFound, "no offer %s of this machine: cshare offer ls lists offers, and only the host's node removes one", api.Ellipsize(id))
	}
	n.saveOffers()
	if t != nil {
		w := n.signer.SignOfferWithdrawal(n.orgID(), id)
		if err := t.Publish(ctx, p2p.OfferMsg{Withdraw: &w}); err != nil {
			return api.OfferInfo{}, api.Errorf(http.StatusServiceUnavailable, "the offer is withdrawn here but the withdrawal was not sent: %v", err)
		}
	}
	return n.offerInfo(so.Offer, "", n.now()), nil
}

func (n *Node) offerInfo(o market.Offer, name string, now time.Time) api.OfferInfo {
	return api.OfferInfoOf(o, name, o.Machine == n.idStr, now.UnixMilli())
}
