package p2p

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
)

type ptTombs map[string][]byte

func (t ptTombs) Tombstone(org string) []byte { return t[org] }

// TestFetchTombstone: a machine that keeps an org's tombstone gives it to
// whoever asks for that org; for another org it answers nothing, and an
// invalid org ID is refused before anything is sent.
func TestFetchTombstone(t *testing.T) {
	server, client := ptHost(t, nil), ptHost(t, nil)
	entry := bytes.Repeat([]byte{0xa5}, 60<<10) // an entry of nearly the largest size
	ServeTombstones(server.LibP2P(), ptTombs{ptOrg: entry})
	ptConnect(t, client, server)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := FetchTombstone(ctx, client.LibP2P(), server.ID(), ptOrg)
	if err != nil || !bytes.Equal(got, entry) {
		t.Fatalf("tombstone of %s: %d bytes, %v; want %d bytes", ptOrg, len(got), err, len(entry))
	}
	got, err = FetchTombstone(ctx, client.LibP2P(), server.ID(), "other-org")
	if err != nil || got != nil {
		t.Fatalf("tombstone of another org: %d bytes, %v; want none", len(got), err)
	}
	for _, org := range []string{"", "a/b", "..", strings.Repeat("x", 300)} {
		if _, err := FetchTombstone(ctx, client.LibP2P(), server.ID(), org); err == nil || !strings.Contains(err.Error(), "org:") {
			t.Errorf("org %q: %v; want an error about org", org, err)
		}
	}
}

// TestTombstoneRefusal: a server's refusal (a request whose org is no org
// ID) reaches the client as ErrTombstoneRefused.
func TestTombstoneRefusal(t *testing.T) {
	b, _ := cbor.Marshal(tombstoneResp{Err: "org: required"})
	if _, err := decodeTombstoneResponse(b); !errors.Is(err, ErrTombstoneRefused) {
		t.Fatalf("refusal: %v", err)
	}
	b, _ = cbor.Marshal(tombstoneReq{Org: "a\x00b"})
	if _, err := decodeTombstoneRequest(b); err == nil {
		t.Fatal("org with NUL accepted")
	}
}

// FuzzDecodeTombstone: any bytes give a request with a valid org ID or an
// error, and a response with an entry, none, or an error; never a panic.
func FuzzDecodeTombstone(f *testing.F) {
	for _, v := range []any{tombstoneReq{Org: ptOrg}, tombstoneReq{}, tombstoneResp{Entry: []byte{1, 2, 3}}, tombstoneResp{Err: "no"}, tombstoneResp{}} {
		b, err := cbor.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xa1, 0x63, 'o', 'r', 'g', 0x61, '/'})
	f.Add(bytes.Repeat([]byte{0x9f}, 2000))
	f.Fuzz(func(t *testing.T, b []byte) {
		org, err := decodeTombstoneRequest(b)
		if err == nil && checkOrgID(org) != nil {
			t.Fatalf("accepted org %q", org)
		}
		if len(b) > maxTombstoneRequest && err == nil {
			t.Fatalf("accepted a request of %d bytes", len(b))
		}
		entry, err := decodeTombstoneResponse(b)
		if err != nil && entry != nil {
			t.Fatalf("an entry and an error")
		}
		if len(b) > maxTombstoneResponse && err == nil {
			t.Fatalf("accepted a response of %d bytes", len(b))
		}
	})
}
