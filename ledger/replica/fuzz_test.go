package replica

import (
	"bytes"
	"testing"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"

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

// FuzzReadHistory: any bytes given as an exported history are read or
// refused, never a panic; every entry it yields verifies (Decode).
func FuzzReadHistory(f *testing.F) {
	a := open(f, f.TempDir(), newSigner(f), Config{})
	genesis(f, a)
	writeN(f, a, 3)
	var buf bytes.Buffer
	if _, err := a.ExportHistory(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(historyMagic))
	f.Add([]byte(historyMagic + "\x05hello"))
	f.Add([]byte("not a history"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = ReadHistory(bytes.NewReader(b), func(e *ledger.Entry) error {
			if _, err := ledger.Decode(e.Bytes()); err != nil {
				t.Fatalf("yielded an entry that does not verify: %v", err)
			}
			return nil
		})
	})
}

// FuzzPrunedOf: the pruned entries a checkpoint offer names (CIDs and
// clocks from a peer) become stubs only when every CID parses and every
// clock is positive; nothing panics.
func FuzzPrunedOf(f *testing.F) {
	g, err := newSigner(f).Sign("", ledger.KindGenesis, ledger.Genesis{Name: "acme", OrgKeyID: "k0", Settings: ledger.DefaultSettings()}, nil, 0, 1)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(g.CID().Bytes(), uint64(3), true)
	f.Add([]byte{1, 2}, uint64(0), false)
	f.Fuzz(func(t *testing.T, b []byte, clock uint64, oneClock bool) {
		o := Offer{Pruned: [][]byte{b}}
		if oneClock {
			o.PrunedClock = []uint64{clock}
		}
		es, err := prunedOf("org", o)
		if err != nil {
			return
		}
		want, cerr := cid.Cast(b)
		if cerr != nil || clock == 0 || !oneClock || len(es) != 1 || !es[0].Stub() || !es[0].CID().Equals(want) || es[0].Clock != clock {
			t.Fatalf("accepted %x at clock %d (one clock %v): %v", b, clock, oneClock, es)
		}
	})
}
