package p2p

import (
	"bytes"
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
)

// TestEncodeHeads: DecodeVerifyHeads gives back what EncodeHeads signed,
// and refuses the message for another org, with a byte changed, or unsigned.
func TestEncodeHeads(t *testing.T) {
	k := ptKey(t)
	id, _ := peer.IDFromPrivateKey(k)
	data, err := EncodeHeads(ptOrg, k, 7, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	from, seq, payload, err := DecodeVerifyHeads(ptOrg, data)
	if err != nil || from != id || seq != 7 || !bytes.Equal(payload, []byte("payload")) {
		t.Fatalf("got %s %d %q %v", from, seq, payload, err)
	}
	if _, _, _, err := DecodeVerifyHeads("other-org", data); !errors.Is(err, ErrBadHeads) {
		t.Fatalf("another org's message: %v", err)
	}
	for i := range data {
		b := append([]byte(nil), data...)
		b[i] ^= 0x01
		if f, s, p, err := DecodeVerifyHeads(ptOrg, b); err == nil && (f != id || s != 7 || !bytes.Equal(p, payload)) {
			t.Fatalf("byte %d changed: accepted as %s %d %q", i, f, s, p)
		}
	}
	unsigned, err := gossipEnc.Marshal(&headsMsg{Seq: 1, Payload: []byte("x"), From: id.String()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := DecodeVerifyHeads(ptOrg, unsigned); !errors.Is(err, ErrBadHeads) {
		t.Fatalf("unsigned: %v", err)
	}
	if _, err := EncodeHeads(ptOrg, k, 1, make([]byte, MaxPayloadSize+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large a payload: %v", err)
	}
}

// FuzzDecodeVerifyHeads: never panics; accepts only a message signed by the
// key its From names, for this org.
func FuzzDecodeVerifyHeads(f *testing.F) {
	k := ptKey(f)
	id, _ := peer.IDFromPrivateKey(k)
	good, err := EncodeHeads(ptOrg, k, 1, []byte("heads"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{0xa0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		from, _, _, err := DecodeVerifyHeads(ptOrg, data)
		if err != nil {
			if !errors.Is(err, ErrBadHeads) {
				t.Fatalf("unexpected error: %v", err)
			}
			return
		}
		if from != id {
			t.Fatalf("accepted a message signed as %s", from)
		}
	})
}
