package marketsvc

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

// book is the offer book, made at its first use: its reliability window
// starts then.
func (s *Service) book() *offerBook {
	s.bookOnce.Do(func() {
		s.bk = &offerBook{since: s.d.Now(), offers: map[string]offerRec{}, withdrawn: map[string]int64{},
			mine: map[string]ledger.SignedOffer{}, beats: map[string][]time.Time{}, kick: make(chan struct{}, 1)}
	})
	return s.bk
}

// Join joins org's offers topic, counts o's heartbeats for reliability,
// and republishes this machine's offers (loaded from the data dir) until
// ctx is done.
func (s *Service) Join(ctx context.Context, org string, o Beats) error {
	b := s.book()
	t, err := s.d.Topics.JoinOffers(org, func(from peer.ID, m *p2p.OfferMsg) *p2p.OfferVerdict { return s.CheckOffer(org, from, m) })
	if err != nil {
		return err
	}
	t.OnMessage(s.onOffer)
	t.OnPeerJoin(func(peer.ID) { b.kickRepublish() })
	// A machine let into the topic by its approval is reconnected (see
	// p2p.Gate.OnReset); its subscription comes with the new connection's
	// first message, a moment later, and GossipSub may report no join for a
	// peer that was reconnected at once: send it the offers then, not at
	// the next republication.
	s.d.Topics.Gate().OnReset(func(peer.ID) { time.AfterFunc(offerResetDelay, b.kickRepublish) })
	o.OnHeartbeat(func(hb p2p.Heartbeat) { b.beat(hb.Machine, s.d.Now()) })
	b.mu.Lock()
	b.topic = t
	b.mu.Unlock()
	s.loadOffers(org)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(offerRepublish)
		defer tick.Stop()
		for {
			s.republishOffers(ctx)
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			case <-b.kick:
			}
		}
	}()
	return nil
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

// CheckOffer is the offers topic's validator: the signature and org, an
// approved machine of the org that has what the offer includes, and an
// offer still open. Expired offers, and machines this node does not know
// yet, are ignored without penalty.
func (s *Service) CheckOffer(org string, _ peer.ID, m *p2p.OfferMsg) *p2p.OfferVerdict {
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
	case !o.Live(s.d.Now().UnixMilli()):
		return &p2p.OfferVerdict{Reason: "expired", Ignore: true}
	}
	var v *p2p.OfferVerdict
	s.d.Ledger.View(func(st *ledger.State) {
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

func (s *Service) onOffer(m p2p.OfferMsg) {
	b := s.book()
	b.mu.Lock()
	defer b.mu.Unlock()
	if w := m.Withdraw; w != nil {
		if r, ok := b.offers[w.Offer]; ok && r.o.Machine == w.Machine {
			delete(b.offers, w.Offer)
			b.withdrawn[w.Offer] = r.o.Until
		}
		return
	}
	o, err := m.Offer.Verify(s.orgID())
	if err != nil {
		return
	}
	if _, gone := b.withdrawn[o.ID]; gone {
		return
	}
	b.offers[o.ID] = offerRec{so: *m.Offer, o: o, seen: s.d.Now()}
}

func (s *Service) republishOffers(ctx context.Context) {
	b := s.book()
	now := s.d.Now()
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
		pctx, c := context.WithTimeout(ctx, 5*time.Second)
		if err := t.Publish(pctx, p2p.OfferMsg{Offer: &send[i]}); err != nil && !errors.Is(err, context.Canceled) {
			s.d.Log.Debug("could not publish an offer", "offer", send[i].Offer.ID, "err", err)
		}
		c()
	}
}

type offersOnDisk struct {
	Org    string               `json:"org"`
	Offers []ledger.SignedOffer `json:"offers"`
}

func (s *Service) saveOffers() {
	b := s.book()
	b.mu.Lock()
	d := offersOnDisk{Org: s.orgID()}
	for _, so := range b.mine {
		d.Offers = append(d.Offers, so)
	}
	b.mu.Unlock()
	sort.Slice(d.Offers, func(i, j int) bool { return d.Offers[i].Offer.ID < d.Offers[j].Offer.ID })
	data, err := json.Marshal(d)
	if err == nil {
		err = atomicfile.WriteFile(filepath.Join(s.d.DataDir, offersFile), data, 0o600)
	}
	if err != nil {
		s.d.Log.Warn("could not save this machine's offers", "err", err)
	}
}

func (s *Service) loadOffers(org string) {
	data, err := os.ReadFile(filepath.Join(s.d.DataDir, offersFile))
	if err != nil {
		return
	}
	var d offersOnDisk
	if json.Unmarshal(data, &d) != nil || d.Org != org {
		return
	}
	b := s.book()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, so := range d.Offers {
		if o, err := so.Verify(org); err == nil && o.Machine == s.d.Machine {
			so.Offer.ID = o.ID
			b.mine[o.ID] = so
		}
	}
}

// CreateOffer signs an offer for part of this machine and publishes it.
func (s *Service) CreateOffer(ctx context.Context, req api.OfferCreate) (api.OfferInfo, error) {
	org := s.orgID()
	if org == "" {
		return api.OfferInfo{}, api.Errorf(http.StatusConflict, "this node is in no org: join one first (cshare node join --org-key KEY)")
	}
	var m *ledger.Machine
	s.d.Ledger.View(func(st *ledger.State) {
		if mm := st.Machines[s.d.Machine]; mm != nil && mm.Status == ledger.MachineApproved {
			c := *mm
			m = &c
		}
	})
	if m == nil {
		return api.OfferInfo{}, api.Errorf(http.StatusConflict, "this machine is not approved in the org: an admin approves it with cshare machine approve %s", s.d.Machine)
	}
	now := s.d.Now()
	o, err := req.Offer(s.d.Machine, ledger.MarketHardware(m.Hardware), now.UnixMilli())
	if err != nil {
		return api.OfferInfo{}, err
	}
	o.AgeRecipient = s.d.AgeRecipient
	so := s.d.Signer.SignOffer(org, o)
	if _, err := so.Verify(org); err != nil {
		return api.OfferInfo{}, api.BadRequest(err)
	}
	b := s.book()
	b.mu.Lock()
	b.mine[so.Offer.ID] = so
	b.offers[so.Offer.ID] = offerRec{so: so, o: so.Offer, seen: now}
	t := b.topic
	b.mu.Unlock()
	s.saveOffers()
	if t != nil {
		if err := t.Publish(ctx, p2p.OfferMsg{Offer: &so}); err != nil {
			s.d.Log.Warn("could not publish the offer now; it is republished every "+offerRepublish.String(), "err", err)
		}
	}
	return s.offerInfo(so.Offer, m.Name, now), nil
}

// Offers lists the open offers that match query, sorted by order.
func (s *Service) Offers(_ context.Context, query, order string) ([]api.OfferInfo, error) {
	q, err := market.ParseQuery(query)
	if err != nil {
		return nil, api.FieldErrorf(http.StatusBadRequest, "query", "%v", err)
	}
	orders, err := market.ParseOrder(order)
	if err != nil {
		return nil, api.FieldErrorf(http.StatusBadRequest, "order", "%v", err)
	}
	now := s.d.Now()
	b := s.book()
	b.mu.Lock()
	recs := make([]offerRec, 0, len(b.offers))
	for _, r := range b.offers {
		if r.o.Live(now.UnixMilli()) && now.Sub(r.seen) <= offerStale {
			recs = append(recs, r)
		}
	}
	b.mu.Unlock()
	names := map[string]string{}
	s.d.Ledger.View(func(st *ledger.State) {
		for _, r := range recs {
			if m := st.Machines[r.o.Machine]; m != nil {
				names[r.o.Machine] = m.Name
			}
		}
	})
	ls := make([]market.Listing, len(recs))
	for i, r := range recs {
		ls[i] = market.Listing{Offer: r.o, MachineName: names[r.o.Machine], Reliability: b.reliability(r.o.Machine, s.d.Interval, now)}
		if r.o.Machine == s.d.Machine {
			ls[i].Reliability = 1 // our own heartbeats are not received
		}
	}
	out := []api.OfferInfo{}
	for _, l := range market.Search(ls, q, orders, now.UnixMilli()) {
		info := s.offerInfo(l.Offer, l.MachineName, now)
		info.Reliability = l.Reliability
		out = append(out, info)
	}
	return out, nil
}

// RemoveOffer withdraws one of this machine's offers.
func (s *Service) RemoveOffer(ctx context.Context, id string) (api.OfferInfo, error) {
	b := s.book()
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
	s.saveOffers()
	if t != nil {
		w := s.d.Signer.SignOfferWithdrawal(s.orgID(), id)
		if err := t.Publish(ctx, p2p.OfferMsg{Withdraw: &w}); err != nil {
			return api.OfferInfo{}, api.Errorf(http.StatusServiceUnavailable, "the offer is withdrawn here but the withdrawal was not sent: %v", err)
		}
	}
	return s.offerInfo(so.Offer, "", s.d.Now()), nil
}

func (s *Service) offerInfo(o market.Offer, name string, now time.Time) api.OfferInfo {
	return api.OfferInfoOf(o, name, o.Machine == s.d.Machine, now.UnixMilli())
}
