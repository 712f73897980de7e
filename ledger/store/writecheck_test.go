package store

import (
	"errors"
	"testing"
)

// TestWriteCheckRefusesEveryWrite: with a write check that refuses, no
// write of any kind reaches Badger, each gets the check's error as it is,
// and reads and deletes still work.
func TestWriteCheckRefusesEveryWrite(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kept := block(1, 100)
	if err := s.PutBlocks([]Block{kept}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRecord("r/1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	full := errors.New("disk full: 0 MiB free in /d, cshare keeps 8 MiB")
	var asked []int64
	s.SetWriteCheck(func(need int64) error { asked = append(asked, need); return full })

	b := block(2, 5000)
	if err := s.PutBlocks([]Block{b}); err != full {
		t.Fatalf("put blocks: %v", err)
	}
	if len(asked) != 1 || asked[0] < 5000 {
		t.Fatalf("asked %v; want one check of at least the block's 5000 bytes", asked)
	}
	if s.HasBlock(b.CID) {
		t.Fatal("a refused block is stored")
	}
	if err := s.SetMeta("k", []byte("v")); err != full {
		t.Fatalf("set meta: %v", err)
	}
	if _, err := s.Meta("k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused meta is stored: %v", err)
	}
	if err := s.PutRecord("r/2", []byte("y")); err != full {
		t.Fatalf("put record: %v", err)
	}
	if _, err := s.PutDataBlocks([]Block{block(3, 100)}, nil); err != full {
		t.Fatalf("put small data blocks: %v", err)
	}
	if _, err := s.PutDataBlocks([]Block{block(4, 8<<10)}, nil); err != full {
		t.Fatalf("put packed data blocks: %v", err)
	}
	if s.HasDataBlock(block(3, 100).CID) || s.HasDataBlock(block(4, 8<<10).CID) {
		t.Fatal("a refused data block is stored")
	}
	// Reads and deletes go on.
	if got, err := s.GetBlock(kept.CID); err != nil || len(got) != 100 {
		t.Fatalf("read while refusing writes: %d bytes, %v", len(got), err)
	}
	if err := s.DeleteRecords([]string{"r/1"}); err != nil {
		t.Fatalf("delete while refusing writes: %v", err)
	}
	n := 0
	if err := s.ForEachRecord("r/", func(string, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("records after delete: %d, %v", n, err)
	}
	// The check lifted, writes go through again.
	s.SetWriteCheck(func(int64) error { return nil })
	if err := s.PutBlocks([]Block{b}); err != nil || !s.HasBlock(b.CID) {
		t.Fatalf("put after the check lifted: %v", err)
	}
	s.SetWriteCheck(nil)
	if err := s.SetMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}
