package marketsvc

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// fakeLedger is a fixed state: the market reads it, and writes nothing.
type fakeLedger struct {
	org string
	st  *ledger.State
}

func (f *fakeLedger) View(fn func(st *ledger.State)) { fn(f.st) }
func (f *fakeLedger) Org() string                    { return f.org }
func (f *fakeLedger) Write(context.Context, string, any) (*ledger.Entry, error) {
	return nil, errors.New("read-only")
}

func newSigner(t *testing.T) *ledger.Signer {
	t.Helper()
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ledger.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testService is a market of machine me over a state where me and host
// are approved machines; its clock is *now.
func testService(t *testing.T, me, host *ledger.Signer, dir string, now *time.Time) *Service {
	st := ledger.NewState()
	for _, m := range []struct {
		s    *ledger.Signer
		name string
	}{{me, "me"}, {host, "gpu-box"}} {
		id := m.s.ID().String()
		st.Machines[id] = &ledger.Machine{ID: id, Name: m.name, Owner: id, Status: ledger.MachineApproved,
			Hardware: ledger.Hardware{CPUs: 8, MemoryMB: 8192}}
	}
	return New(Deps{Ledger: &fakeLedger{org: "org1", st: st}, Signer: me, Machine: me.ID().String(),
		Person: func() string { return me.ID().String() }, DataDir: dir, Interval: time.Second,
		Now: func() time.Time { return *now }, Log: slog.New(slog.DiscardHandler)})
}

func listed(t *testing.T, s *Service, query string) []api.OfferInfo {
	t.Helper()
	os, err := s.Offers(context.Background(), query, "")
	if err != nil {
		t.Fatal(err)
	}
	return os
}

// TestOfferBook: an offer heard from its host is listed with its
// machine's name and reliability, matches queries, is dropped on its
// host's withdrawal (and a replay is then ignored) or when not heard for
// offerStale; only the host's node removes it.
func TestOfferBook(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	me, host := newSigner(t), newSigner(t)
	s := testService(t, me, host, t.TempDir(), &now)
	o := market.Offer{Machine: host.ID().String(), CPUs: 2, MemoryMB: 1024, Price: 1_500_000, Created: now.UnixMilli(), Until: now.UnixMilli() + market.Day}
	so := host.SignOffer("org1", o)
	if v := s.CheckOffer("org1", "", &p2p.OfferMsg{Seq: 1, Offer: &so}); v != nil {
		t.Fatalf("a good offer: %+v", v)
	}
	s.book() // the reliability window starts
	for i := range 5 {
		s.book().beat(host.ID().String(), now.Add(time.Duration(i)*time.Second))
	}
	now = now.Add(10 * time.Second)
	s.onOffer(p2p.OfferMsg{Offer: &so})
	got := listed(t, s, "cpus>=2 price<2")
	if len(got) != 1 || got[0].MachineName != "gpu-box" || got[0].Mine || got[0].Reliability != 0.5 {
		t.Fatalf("listed %+v", got)
	}
	if got := listed(t, s, "price>2"); len(got) != 0 {
		t.Fatalf("price>2 lists %+v", got)
	}
	if _, err := s.Offers(context.Background(), "gpus>=two", ""); statusOf(err) != http.StatusBadRequest {
		t.Fatalf("a bad query: %v", err)
	}
	if _, err := s.RemoveOffer(context.Background(), got[0].ID); statusOf(err) != http.StatusNotFound {
		t.Fatalf("removed another machine's offer: %v", err)
	}
	w := host.SignOfferWithdrawal("org1", got[0].ID)
	s.onOffer(p2p.OfferMsg{Withdraw: &w})
	s.onOffer(p2p.OfferMsg{Offer: &so}) // a replay
	if got := listed(t, s, ""); len(got) != 0 {
		t.Fatalf("a withdrawn offer listed: %+v", got)
	}

	s2 := testService(t, me, host, t.TempDir(), &now)
	s2.onOffer(p2p.OfferMsg{Offer: &so})
	now = now.Add(offerStale + time.Second)
	if got := listed(t, s2, ""); len(got) != 0 {
		t.Fatalf("an offer not heard for %s listed: %+v", offerStale, got)
	}
}

// TestOwnOffersSaved: this machine's offers are saved in the data dir and
// loaded for the same org only; a removed one is gone from the file.
func TestOwnOffersSaved(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	me, host := newSigner(t), newSigner(t)
	dir := t.TempDir()
	s := testService(t, me, host, dir, &now)
	one := int64(1)
	info, err := s.CreateOffer(context.Background(), api.OfferCreate{Price: "1.25", CPUs: &one, MemoryMB: &one, ForMS: market.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !info.Mine || info.Machine != me.ID().String() {
		t.Fatalf("created %+v", info)
	}
	mine := func(org string) int {
		r := testService(t, me, host, dir, &now)
		r.loadOffers(org)
		return len(r.book().mine)
	}
	if got := mine("org1"); got != 1 {
		t.Fatalf("loaded %d offers, want 1", got)
	}
	if got := mine("org2"); got != 0 {
		t.Fatalf("another org's node loaded %d offers", got)
	}
	if _, err := s.RemoveOffer(context.Background(), info.ID); err != nil {
		t.Fatal(err)
	}
	if got := mine("org1"); got != 0 {
		t.Fatalf("a removed offer loaded again: %d", got)
	}
}

func statusOf(err error) int {
	var se *api.StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}
