package p2p

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

func TestHeartbeatEncoding(t *testing.T) {
	k := ptKey(t)
	hb := ptSigned(t, ptOrg, k, 42)
	hb.Instances = []RunningInstance{{Job: "j", Slot: 1, Kind: "secondary", Item: 9, Instance: "x", Started: 5}}
	if err := hb.Sign(ptOrg, k); err != nil {
		t.Fatal(err)
	}
	b := ptEncode(t, hb)
	got, err := DecodeVerifyHeartbeat(ptOrg, b)
	if err != nil {
		t.Fatal(err)
	}
	again := ptEncode(t, got)
	if !bytes.Equal(again, b) {
		t.Fatal("round trip changed bytes")
	}
	if _, err := DecodeVerifyHeartbeat("other-org", b); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("cross-org verify: %v", err)
	}
	tampered := got
	tampered.Free.Cores++
	if err := tampered.Verify(ptOrg); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered verify: %v", err)
	}
	// Unknown fields are refused.
	var m map[string]any
	if err := cbor.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["extra"] = 1
	withExtra, _ := gossipEnc.Marshal(m)
	if _, err := DecodeHeartbeat(withExtra); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown field: %v", err)
	}
	// Seq 0 and a bad machine ID are refused.
	z := got
	z.Seq = 0
	if _, err := DecodeHeartbeat(ptEncode(t, z)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("seq 0: %v", err)
	}
	z = got
	z.Machine = "not-a-peer"
	if _, err := DecodeHeartbeat(ptEncode(t, z)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad machine: %v", err)
	}
	if _, err := DecodeHeartbeat(make([]byte, MaxPayloadSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

// TestHeartbeatFetches: dataset fetches round-trip; more than MaxFetches, an
// empty CID, a negative size or more bytes held than the dataset has are
// refused.
func TestHeartbeatFetches(t *testing.T) {
	k := ptKey(t)
	hb := ptSigned(t, ptOrg, k, 7)
	hb.Fetches = []DatasetFetch{{CID: "bafkreiexample", Have: 10, Size: 20}}
	got, err := DecodeHeartbeat(ptEncode(t, hb))
	if err != nil || len(got.Fetches) != 1 || got.Fetches[0] != hb.Fetches[0] {
		t.Fatalf("round trip: %+v, %v", got.Fetches, err)
	}
	for name, fs := range map[string][]DatasetFetch{
		"too many":  make([]DatasetFetch, MaxFetches+1),
		"empty CID": {{CID: "", Have: 0, Size: 1}},
		"long CID":  {{CID: string(bytes.Repeat([]byte("b"), 129)), Size: 1}},
		"negative":  {{CID: "b", Have: -1, Size: 1}},
		"over":      {{CID: "b", Have: 2, Size: 1}},
		"neg. size": {{CID: "b", Have: 0, Size: -1}},
	} {
		for i := range fs {
			if fs[i].CID == "" && name == "too many" {
				fs[i] = DatasetFetch{CID: "b", Size: 1}
			}
		}
		bad := hb
		bad.Fetches = fs
		if _, err := DecodeHeartbeat(ptEncode(t, bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// TestHeartbeatJupyter: the Jupyter proxy round-trips; a port out of
// range, a proxy without a certificate or with a long one are refused.
func TestHeartbeatJupyter(t *testing.T) {
	k := ptKey(t)
	hb := ptSigned(t, ptOrg, k, 7)
	hb.Jupyter = &JupyterProxy{Port: 8443, Cert: "sha256//abc"}
	got, err := DecodeHeartbeat(ptEncode(t, hb))
	if err != nil || got.Jupyter == nil || *got.Jupyter != *hb.Jupyter {
		t.Fatalf("round trip: %+v, %v", got.Jupyter, err)
	}
	for name, j := range map[string]*JupyterProxy{
		"port":      {Port: 70000, Cert: "x"},
		"no port":   {Cert: "x"},
		"no cert":   {Port: 8443},
		"long cert": {Port: 8443, Cert: string(bytes.Repeat([]byte("a"), MaxJupyterCert+1))},
	} {
		bad := hb
		bad.Jupyter = j
		if _, err := DecodeHeartbeat(ptEncode(t, bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	hb.JupyterDirect = map[string]int64{"c0123456789ab": 32768}
	if got, err := DecodeHeartbeat(ptEncode(t, hb)); err != nil || got.JupyterDirect["c0123456789ab"] != 32768 {
		t.Fatalf("direct round trip: %+v, %v", got.JupyterDirect, err)
	}
	many := map[string]int64{}
	for i := range MaxJupyterDirect + 1 {
		many[fmt.Sprint("c", i)] = 1
	}
	for name, d := range map[string]map[string]int64{
		"port":     {"c1": 0},
		"long id":  {string(bytes.Repeat([]byte("c"), MaxJupyterDirectID+1)): 1},
		"too many": many,
	} {
		bad := hb
		bad.JupyterDirect = d
		if _, err := DecodeHeartbeat(ptEncode(t, bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("direct %s: %v, want ErrMalformed", name, err)
		}
	}
}

func FuzzDecodeHeartbeat(f *testing.F) {
	k := ptKey(f)
	f.Add(ptEncode(f, ptSigned(f, ptOrg, k, 1)))
	withFetch := ptSigned(f, ptOrg, k, 2)
	withFetch.Fetches = []DatasetFetch{{CID: "bafkreiexample", Have: 1, Size: 2}}
	f.Add(ptEncode(f, withFetch))
	f.Add([]byte{0xa0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		hb, err := DecodeHeartbeat(data)
		if err != nil {
			return
		}
		// Anything accepted re-encodes to exactly the input.
		b, err := EncodeHeartbeat(&hb)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("accepted non-canonical input")
		}
		_ = hb.Verify(ptOrg)
	})
}
