package p2p

import (
	"bytes"
	"errors"
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

func FuzzDecodeHeartbeat(f *testing.F) {
	k := ptKey(f)
	f.Add(ptEncode(f, ptSigned(f, ptOrg, k, 1)))
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
