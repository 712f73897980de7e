package p2p

import (
	"strings"
	"testing"

	"github.com/cshare/cshare/ledger"
)

// FuzzAdmitRequest: an admission request from a peer never panics the
// decoder, and what it accepts names one org, a capability of that org of a
// known kind, signed, and a proof signature.
func FuzzAdmitRequest(f *testing.F) {
	c := ledger.Capability{Org: "org", Kind: ledger.CapOrgKey, ID: "k", Role: ledger.RoleMember, Issuer: []byte{1}, Sig: []byte{1}}
	for _, r := range []admitRequest{{Org: "org", Cap: c, Sig: []byte{1}}, {Org: "org"}, {Org: "a/b", Cap: c, Sig: []byte{1}}} {
		b, err := gossipEnc.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeAdmitRequest(data)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if req.Cap.Org != req.Org || len(req.Sig) == 0 || len(req.Cap.Sig) == 0 || checkOrgID(req.Org) != nil {
			t.Fatalf("accepted %+v", req)
		}
	})
}
