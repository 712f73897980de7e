package replica

import (
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/cshare/cshare/ledger"
)

// FuzzOnHeads: any heads announcement from a peer (the ledger topic's
// payload) is taken or dropped, never a panic, and never adds an entry
// that does not verify.
func FuzzOnHeads(f *testing.F) {
	a := open(f, f.TempDir(), newSigner(f), Config{})
	genesis(f, a)
	writeN(f, a, 2)
	good := a.Collect(nil, 0, 10)
	heads, clock := a.Heads()
	var hs [][]byte
	for _, h := range heads {
		hs = append(hs, h.Bytes())
	}
	for _, m := range []headsMsg{{Heads: hs, Clock: clock}, {Heads: hs, Clock: clock, Entries: good[len(good)-1:]}, {}} {
		b, err := cbor.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("not cbor"))
	// The replica under attack has the org's first entries and fetches
	// nothing (Spawn drops the syncs an announcement starts).
	b := open(f, f.TempDir(), newSigner(f), Config{Spawn: func(func()) {}})
	gen, err := ledger.Decode(good[0])
	if err != nil {
		f.Fatal(err)
	}
	b.add("", []*ledger.Entry{gen})
	f.Fuzz(func(t *testing.T, payload []byte) {
		n := b.Len()
		b.OnHeads("a", payload)
		_ = b.HasHeadsPayload(payload)
		// Only the org's real entries (signed by its owner) can enter.
		if b.Len() < n || b.Len() > len(good) {
			t.Fatalf("the log went from %d to %d entries; the org has %d", n, b.Len(), len(good))
		}
	})
}

// FuzzParseHeadsPayload: never panics; what it accepts is within OnHeads's
// limits, and a payload HeadsPayload built parses back to its heads and
// entry.
func FuzzParseHeadsPayload(f *testing.F) {
	a := open(f, f.TempDir(), newSigner(f), Config{})
	genesis(f, a)
	writeN(f, a, 2)
	heads, clock := a.Heads()
	last := a.Get(heads[0])
	good, err := HeadsPayload(heads, clock, last)
	if err != nil {
		f.Fatal(err)
	}
	hs, pushed, err := ParseHeadsPayload(good)
	if err != nil || len(hs) != len(heads) || !hs[0].Equals(heads[0]) || len(pushed) != 1 || string(pushed[0]) != string(last.Bytes()) {
		f.Fatalf("round trip: %v %v %v", hs, len(pushed), err)
	}
	f.Add(good)
	f.Add([]byte("not cbor"))
	f.Fuzz(func(t *testing.T, payload []byte) {
		hs, pushed, err := ParseHeadsPayload(payload)
		if err == nil && (len(hs) > 4096 || len(pushed) > 4) {
			t.Fatalf("accepted %d heads and %d entries", len(hs), len(pushed))
		}
	})
}
