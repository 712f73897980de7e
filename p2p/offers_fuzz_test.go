package p2p

import (
	"testing"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
)

// FuzzOfferMsg: an offers-topic message from a peer never panics the
// decoder or the offer's verification.
func FuzzOfferMsg(f *testing.F) {
	so := ledger.SignedOffer{Org: "org", Offer: market.Offer{Machine: "m", CPUs: 1, MemoryMB: 1, Until: 10}, Sig: []byte{1}}
	w := ledger.OfferWithdrawal{Org: "org", Offer: "o", Machine: "m"}
	for _, m := range []OfferMsg{{Seq: 1, Offer: &so}, {Seq: 2, Withdraw: &w}, {Seq: 3}} {
		b, err := gossipEnc.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m OfferMsg
		if gossipDec.Unmarshal(data, &m) != nil {
			return
		}
		if m.Offer != nil {
			_, _ = m.Offer.Verify("org")
		}
		if m.Withdraw != nil {
			_ = m.Withdraw.Verify("org")
		}
	})
}
