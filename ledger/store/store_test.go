package store

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"

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

// TestRecords: write-ahead records survive a reopen, list by prefix in key
// order, and go when deleted.
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
	if got := list(); len(got) != 2 || got[0] != "r/a/1" || got[1] != "r/b/2" {
		t.Fatalf("records = %v", got)
	}
	if err := s.DeleteRecords([]string{"r/a/1", "r/none"}); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 1 || got[0] != "r/b/2" {
		t.Fatalf("after delete: %v", got)
	}
}
