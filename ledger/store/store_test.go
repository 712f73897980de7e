package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"
)

func block(i, size int) Block {
	data := bytes.Repeat([]byte(fmt.Sprintf("block %d;", i)), size/8+1)[:size]
	sum := sha256.Sum256(data)
	h, _ := mh.Encode(sum[:], mh.SHA2_256)
	return Block{CID: cid.NewCidV1(0x51, h), Data: data}
}

// TestReopen: blocks and metadata written before Close are all there after
// Open, and ForEachBlock sees each exactly once. (kill -9 is the multi-host
// tests' business; SyncWrites is what makes an acknowledged write durable.)
func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want []Block
	// One small batch, then one larger than a Badger transaction (so
	// PutBlocks must split it), then a single block.
	for i := 0; i < 10; i++ {
		want = append(want, block(i, 300))
	}
	if err := s.PutBlocks(want); err != nil {
		t.Fatal(err)
	}
	var big []Block
	for i := 10; i < 3010; i++ {
		big = append(big, block(i, 1000))
	}
	if err := s.PutBlocks(big); err != nil {
		t.Fatal(err)
	}
	want = append(want, big...)
	one := block(99999, 64<<10)
	if err := s.PutBlocks([]Block{one}); err != nil {
		t.Fatal(err)
	}
	want = append(want, one)
	if err := s.PutBlocks(nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	if err := s.SetMeta("heads", []byte("h1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta("heads", []byte("h2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	byKey := map[string][]byte{}
	for _, b := range want {
		byKey[b.CID.KeyString()] = b.Data
		got, err := s.GetBlock(b.CID)
		if err != nil {
			t.Fatalf("block %s lost: %v", b.CID, err)
		}
		if !bytes.Equal(got, b.Data) {
			t.Fatalf("block %s changed", b.CID)
		}
		if !s.HasBlock(b.CID) {
			t.Fatalf("HasBlock(%s) = false", b.CID)
		}
	}
	seen := map[string]bool{}
	err = s.ForEachBlock(func(c cid.Cid, data []byte) error {
		k := c.KeyString()
		if seen[k] {
			return fmt.Errorf("block %s seen twice", c)
		}
		seen[k] = true
		if !bytes.Equal(byKey[k], data) {
			return fmt.Errorf("block %s: wrong data", c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(byKey) {
		t.Fatalf("ForEachBlock saw %d blocks, want %d", len(seen), len(byKey))
	}
	if v, err := s.Meta("heads"); err != nil || string(v) != "h2" {
		t.Fatalf("Meta(heads) = %q, %v", v, err)
	}
	// Metadata is not a block.
	if _, err := s.Meta("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Meta(nope): %v, want ErrNotFound", err)
	}
	missing := block(-1, 10).CID
	if _, err := s.GetBlock(missing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetBlock(missing): %v, want ErrNotFound", err)
	}
	if s.HasBlock(missing) {
		t.Fatal("HasBlock(missing) = true")
	}
	// ForEachBlock stops at the first error and returns it.
	stop := errors.New("stop")
	n := 0
	if err := s.ForEachBlock(func(cid.Cid, []byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("ForEachBlock with a failing fn: %v after %d calls", err, n)
	}
}

// TestPutIdempotent: putting a block again is harmless.
func TestPutIdempotent(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := block(1, 100)
	for i := 0; i < 3; i++ {
		if err := s.PutBlocks([]Block{b, b}); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	if err := s.ForEachBlock(func(cid.Cid, []byte) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("%d blocks, %v", n, err)
	}
}

func TestOpenLockedDir(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s2, err := Open(dir, nil); err == nil {
		s2.Close()
		t.Fatal("a second Open of a store in use succeeded")
	}
}

// TestLargeBlock: a block larger than a Badger transaction's inline budget
// (dataset chunks may be) goes to the value log and reads back intact.
func TestLargeBlock(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := block(1, 4<<20)
	if err := s.PutBlocks([]Block{b, block(2, 10)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.GetBlock(b.CID); err != nil || !bytes.Equal(got, b.Data) {
		t.Fatalf("large block: %v", err)
	}
}

// TestRecords: write-ahead records, put one by one or in a batch, survive a
// reopen, list by prefix in key order, and go when deleted.
func TestRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"r/b/2", "r/a/1", "x/1"} {
		if err := s.PutRecord(k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutRecords([]Record{{"r/d/4", []byte("r/d/4")}, {"r/c/3", []byte("r/c/3")}, {"y/1", []byte("y/1")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	list := func() []string {
		var got []string
		if err := s.ForEachRecord("r/", func(k string, v []byte) error {
			if string(v) != k {
				t.Fatalf("record %s holds %q", k, v)
			}
			got = append(got, k)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(); !slices.Equal(got, []string{"r/a/1", "r/b/2", "r/c/3", "r/d/4"}) {
		t.Fatalf("records = %v", got)
	}
	if err := s.DeleteRecords([]string{"r/a/1", "r/c/3", "r/none"}); err != nil {
		t.Fatal(err)
	}
	if got := list(); !slices.Equal(got, []string{"r/b/2", "r/d/4"}) {
		t.Fatalf("after delete: %v", got)
	}
}

// TestDataPins: PutDataBlocks pins every block of a batch, stored before or
// not, under its import's ID; ForEachDataPin sees each pin with its time
// (whole seconds); DeleteDataPins removes one import's pins only and leaves
// the blocks; a bad pin ID writes nothing.
func TestDataPins(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b, c := block(1, 2000), block(2, 10), block(3, 300)
	if n, err := s.PutDataBlocks([]Block{a}, nil); err != nil || n != 1 {
		t.Fatalf("put a = %d, %v", n, err)
	}
	at := time.Unix(1_700_000_000, 0)
	if n, err := s.PutDataBlocks([]Block{a, b}, &Pin{ID: "one", At: at}); err != nil || n != 1 {
		t.Fatalf("put a, b pinned = %d, %v; want 1 new", n, err)
	}
	if _, err := s.PutDataBlocks([]Block{c}, &Pin{ID: "two", At: at.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "a/b", strings.Repeat("x", 65)} {
		if _, err := s.PutDataBlocks([]Block{block(4, 10)}, &Pin{ID: id, At: at}); err == nil {
			t.Errorf("pin ID %q accepted", id)
		}
	}
	if s.HasDataBlock(block(4, 10).CID) {
		t.Error("a put with a bad pin stored its block")
	}
	pins := func() map[string]string {
		out := map[string]string{}
		if err := s.ForEachDataPin(func(p Pin, c cid.Cid) error {
			out[c.String()] = p.ID + "@" + p.At.UTC().Format(time.RFC3339)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := map[string]string{
		a.CID.String(): "one@2023-11-14T22:13:20Z",
		b.CID.String(): "one@2023-11-14T22:13:20Z",
		c.CID.String(): "two@2023-11-14T23:13:20Z",
	}
	if got := pins(); !maps.Equal(got, want) {
		t.Fatalf("pins = %v, want %v", got, want)
	}
	if err := s.DeleteDataPins([]string{"one", "absent"}); err != nil {
		t.Fatal(err)
	}
	if got := pins(); len(got) != 1 || got[c.CID.String()] == "" {
		t.Errorf("after deleting one's pins: %v", got)
	}
	for _, blk := range []Block{a, b, c} {
		if !s.HasDataBlock(blk.CID) {
			t.Errorf("block %s gone with its pin", blk.CID)
		}
	}
}

// TestDataPacks: blocks of 4 KiB or more go to pack files, smaller ones to
// Badger; both read back whole (also after a reopen, and into a caller's
// buffer), with their sizes; a pack file goes when its last block is
// deleted, not before.
func TestDataPacks(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	small, big1, big2 := block(1, 100), block(2, 300<<10), block(3, 4<<10)
	if n, err := s.PutDataBlocks([]Block{small, big1, big2}, nil); err != nil || n != 3 {
		t.Fatalf("put = %d, %v", n, err)
	}
	if n, err := s.PutDataBlocks([]Block{big1}, nil); err != nil || n != 0 {
		t.Fatalf("put again = %d, %v; want 0 new", n, err)
	}
	packFiles := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, "packs", "*.pack"))
		return m
	}
	if got := packFiles(); len(got) != 1 {
		t.Fatalf("pack files %v, want 1", got)
	}
	check := func(s *Store) {
		t.Helper()
		for _, b := range []Block{small, big1, big2} {
			got, err := s.DataBlock(b.CID)
			if err != nil || !bytes.Equal(got, b.Data) {
				t.Fatalf("block of %d bytes: %d bytes back, %v", len(b.Data), len(got), err)
			}
			if n, err := s.DataBlockSize(b.CID); err != nil || n != len(b.Data) {
				t.Fatalf("size = %d, %v; want %d", n, err, len(b.Data))
			}
			buf := make([]byte, 0, 512<<10)
			if got, err := s.DataBlockInto(b.CID, buf); err != nil || !bytes.Equal(got, b.Data) || (len(got) > 0 && &got[:1][0] != &buf[:1][0]) {
				t.Fatalf("DataBlockInto: %d bytes, %v, or not in the buffer", len(got), err)
			}
		}
		var n int
		if err := s.ForEachDataCID(func(cid.Cid) error { n++; return nil }); err != nil || n != 3 {
			t.Fatalf("ForEachDataCID: %d, %v", n, err)
		}
	}
	check(s)
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	check(s)
	// A new batch after the reopen goes to a new pack.
	big4 := block(4, 64<<10)
	if _, err := s.PutDataBlocks([]Block{big4}, nil); err != nil {
		t.Fatal(err)
	}
	if got := packFiles(); len(got) != 2 {
		t.Fatalf("pack files %v, want 2", got)
	}
	if err := s.DeleteDataBlocks([]cid.Cid{big1.CID, small.CID}); err != nil {
		t.Fatal(err)
	}
	if got := packFiles(); len(got) != 2 {
		t.Fatalf("after deleting one of two packed blocks: pack files %v, want 2", got)
	}
	if _, err := s.DataBlock(big1.CID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted block: %v", err)
	}
	if got, err := s.DataBlock(big2.CID); err != nil || !bytes.Equal(got, big2.Data) {
		t.Fatalf("the other block of the pack: %v", err)
	}
	if err := s.DeleteDataBlocks([]cid.Cid{big2.CID}); err != nil {
		t.Fatal(err)
	}
	if got := packFiles(); len(got) != 1 {
		t.Fatalf("after deleting a pack's last block: pack files %v, want the current one", got)
	}
}

// TestDataPacksMixedBatch: one batch of blocks that are page-aligned and
// not (odd sizes, an odd start in memory), written together, reads back
// block for block, also after a reopen.
func TestDataPacksMixedBatch(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	odd := block(5, 64<<10+1)
	odd.Data = odd.Data[1:] // starts one byte into its memory
	odd.CID = block(6, 1).CID
	bs := []Block{block(1, 256<<10), block(2, 5000), odd, block(3, 4097), block(4, 256<<10), block(7, 12<<10)}
	if n, err := s.PutDataBlocks(bs, nil); err != nil || n != len(bs) {
		t.Fatalf("put = %d, %v", n, err)
	}
	check := func(s *Store) {
		t.Helper()
		for i, b := range bs {
			if got, err := s.DataBlock(b.CID); err != nil || !bytes.Equal(got, b.Data) {
				t.Fatalf("block %d of %d bytes: %d bytes back, %v", i, len(b.Data), len(got), err)
			}
		}
	}
	check(s)
	s.Close()
	if s, err = Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
}

// TestJobParts: a finished job's parts read back one by one; a job
// written again with fewer parts keeps none of the old ones; a deletion
// removes them all.
func TestJobParts(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	big := bytes.Repeat([]byte("x"), 3<<20)
	if err := s.PutJobs([]JobOp{{ID: "aaaaaaaaaaaa", Parts: [][]byte{[]byte("h"), big, []byte("p1")}}, {ID: "bbbbbbbbbbbb", Parts: [][]byte{[]byte("h")}}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.JobPart("aaaaaaaaaaaa", 1); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("part 1: %d bytes, %v", len(got), err)
	}
	if err := s.PutJobs([]JobOp{{ID: "aaaaaaaaaaaa", Parts: [][]byte{[]byte("h2")}}, {ID: "bbbbbbbbbbbb"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.JobPart("aaaaaaaaaaaa", 0); err != nil || string(got) != "h2" {
		t.Fatalf("rewritten: %q, %v", got, err)
	}
	for _, c := range []struct {
		id string
		n  int
	}{{"aaaaaaaaaaaa", 1}, {"aaaaaaaaaaaa", 2}, {"bbbbbbbbbbbb", 0}} {
		if _, err := s.JobPart(c.id, c.n); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s part %d: %v, want not found", c.id, c.n, err)
		}
	}
}
