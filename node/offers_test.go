package node

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

func offerIDs(t *testing.T, n *Node, query string) []string {
	t.Helper()
	os, err := n.market.Offers(ctxT(t), query, "")
	if err != nil {
		t.Fatalf("offers: %v", err)
	}
	var ids []string
	for _, o := range os {
		ids = append(ids, o.ID)
	}
	return ids
}

// TestOffersGossip: an offer made on one node is listed by the others
// (through the offers topic and its validator), matches their queries, and
// is gone from every node once withdrawn; only its host withdraws it.
func TestOffersGossip(t *testing.T) {
	m := newMesh(t, meshConfig{n: 3, interval: 200 * time.Millisecond})
	m.formOrg()
	n0 := m.nodes[0].Node
	one := int64(1)
	var info api.OfferInfo
	eventually(t, 20*time.Second, "n0 can offer (its hardware in the ledger)", func() string {
		var err error
		info, err = n0.market.CreateOffer(ctxT(t), api.OfferCreate{Price: "1.25", CPUs: &one, MemoryMB: &one, ForMS: market.Hour})
		if err != nil {
			return err.Error()
		}
		return ""
	})
	if info.Machine != n0.idStr || !info.Mine || info.Price != 1.25 || info.CPUs != 1 {
		t.Fatalf("created %+v", info)
	}
	for _, mn := range m.nodes {
		eventually(t, 30*time.Second, mn.name+" lists the offer", func() string {
			if ids := offerIDs(t, mn.Node, "cpus>=1 price<1.5"); !slices.Contains(ids, info.ID) {
				return fmt.Sprintf("offers %v", ids)
			}
			return ""
		})
		if ids := offerIDs(t, mn.Node, "price>2"); slices.Contains(ids, info.ID) {
			t.Fatalf("%s: price>2 lists a $1.25 offer", mn.name)
		}
	}
	if _, err := m.nodes[1].market.Offers(ctxT(t), "gpus>=two", ""); statusCode(err) != http.StatusBadRequest {
		t.Fatalf("a bad query: %v", err)
	}
	if _, err := m.nodes[1].market.RemoveOffer(ctxT(t), info.ID); statusCode(err) != http.StatusNotFound {
		t.Fatalf("another node removed the offer: %v", err)
	}
	if _, err := n0.market.RemoveOffer(ctxT(t), info.ID); err != nil {
		t.Fatal(err)
	}
	for _, mn := range m.nodes {
		eventually(t, 30*time.Second, mn.name+" drops the withdrawn offer", func() string {
			if ids := offerIDs(t, mn.Node, ""); slices.Contains(ids, info.ID) {
				return fmt.Sprintf("offers %v", ids)
			}
			return ""
		})
	}
}

// TestCheckOffer: the offers topic's validator refuses forged offers and
// offers for resources the machine lacks, and ignores expired ones.
func TestCheckOffer(t *testing.T) {
	m := newMesh(t, meshConfig{n: 1, interval: 200 * time.Millisecond})
	m.formOrg()
	n := m.nodes[0].Node
	org := n.rep.Org()
	var hw ledger.Hardware
	eventually(t, 20*time.Second, "hardware in the ledger", func() string {
		n.rep.View(func(st *ledger.State) { hw = st.Machines[n.idStr].Hardware })
		if hw.CPUs == 0 {
			return "no hardware yet"
		}
		return ""
	})
	now := time.Now().UnixMilli()
	good := market.Offer{CPUs: 1, MemoryMB: 1, Price: 1, Created: now, Until: now + market.Hour}
	verdict := func(o market.Offer, mutate func(*ledger.SignedOffer)) string {
		so := n.signer.SignOffer(org, o)
		if mutate != nil {
			mutate(&so)
		}
		v := n.market.CheckOffer(org, n.id, &p2p.OfferMsg{Seq: 1, Offer: &so})
		if v == nil {
			return "accept"
		}
		if v.Ignore {
			return "ignore " + v.Reason
		}
		return "reject " + v.Reason
	}
	big := good
	big.CPUs = hw.CPUs + 1
	old := good
	old.Created, old.Until = now-2*market.Hour, now-market.Hour
	priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := ledger.NewSigner(priv)
	if err != nil {
		t.Fatal(err)
	}
	fromStranger := stranger.SignOffer(org, good)
	if v := n.market.CheckOffer(org, n.id, &p2p.OfferMsg{Seq: 1, Offer: &fromStranger}); v == nil || !v.Ignore || v.Reason != p2p.IgnoreLagging {
		t.Errorf("an offer by a machine not in the ledger: %+v, want ignored as lagging", v)
	}
	for _, tc := range []struct {
		name   string
		o      market.Offer
		mutate func(*ledger.SignedOffer)
		want   string
	}{
		{"good", good, nil, "accept"},
		{"forged price", good, func(so *ledger.SignedOffer) { so.Offer.Price = 0 }, "reject " + p2p.ReasonBadSignature},
		{"other org", good, func(so *ledger.SignedOffer) { so.Org = "other" }, "reject " + p2p.ReasonUndecodable},
		{"more CPUs than the machine", big, nil, "reject no_resource"},
		{"expired", old, nil, "ignore expired"},
	} {
		if got := verdict(tc.o, tc.mutate); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
