package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
)

// TestDataWriterFlush: blocks put are found only after Flush, pinned then
// too; a block put twice before a flush is written once; a writer used
// after Close fails.
func TestDataWriterFlush(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := s.NewDataWriter(&Pin{ID: "imp", At: time.Unix(1700000000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	small, big := block(1, 100), block(2, 256<<10)
	if n, err := w.Put([]Block{small, big, big}); err != nil || n != 2 {
		t.Fatalf("put = %d, %v; want 2 new", n, err)
	}
	if n, err := w.Put([]Block{big}); err != nil || n != 0 {
		t.Fatalf("put again = %d, %v; want 0 new", n, err)
	}
	pins := func() int {
		n := 0
		if err := s.ForEachDataPin(func(Pin, cid.Cid) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, b := range []Block{small, big} {
		if s.HasDataBlock(b.CID) {
			t.Fatalf("block of %d bytes found before the flush", len(b.Data))
		}
	}
	if n := pins(); n != 0 {
		t.Fatalf("%d pins before the flush", n)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []Block{small, big} {
		if got, err := s.DataBlock(b.CID); err != nil || !bytes.Equal(got, b.Data) {
			t.Fatalf("block of %d bytes after the flush: %d bytes, %v", len(b.Data), len(got), err)
		}
	}
	if n := pins(); n != 2 {
		t.Fatalf("%d pins after the flush, want 2", n)
	}
	if fi, err := os.Stat(s.packs.path(1)); err != nil || fi.Size() != 256<<10 {
		t.Fatalf("pack: %v, %v; want the big block once", fi, err)
	}
	w.Close()
	if _, err := w.Put([]Block{block(3, 10)}); err == nil {
		t.Fatal("put after Close succeeded")
	}
}

// TestDataWriterHeldPack: a pack a writer appended to and left (the next
// append started another) is kept while the writer has not flushed, even
// by a deletion that finds no pointer into it; its block reads back after
// the flush.
func TestDataWriterHeldPack(t *testing.T) {
	s, w := openWriter(t)
	a, b, gone := block(1, 64<<10), block(2, 64<<10), block(3, 64<<10)
	if _, err := s.PutDataBlocks([]Block{gone}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Put([]Block{a}); err != nil {
		t.Fatal(err)
	}
	s.packs.mu.Lock()
	s.packs.curSize = packLimit // the next append starts a new pack
	s.packs.mu.Unlock()
	if _, err := w.Put([]Block{b}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDataBlocks([]cid.Cid{gone.CID}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, blk := range []Block{a, b} {
		if got, err := s.DataBlock(blk.CID); err != nil || !bytes.Equal(got, blk.Data) {
			t.Fatalf("block %s: %d bytes, %v", blk.CID, len(got), err)
		}
	}
}

// TestDataWriterSyncFailed: blocks in a pack whose sync failed (here,
// one in the background) are never pointed at: the flush fails; the next
// writer's blocks go to a new pack and are stored.
func TestDataWriterSyncFailed(t *testing.T) {
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := s.NewDataWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	lost, kept := block(1, 64<<10), block(2, 64<<10)
	if _, err := w.Put([]Block{lost}); err != nil {
		t.Fatal(err)
	}
	s.packs.setBad(1, syscall.EIO)
	if err := w.Flush(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("flush = %v, want EIO", err)
	}
	w.Close()
	if _, err := s.DataBlock(lost.CID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("block of the failed pack: %v; want ErrNotFound", err)
	}
	if n, err := s.PutDataBlocks([]Block{kept}, nil); err != nil || n != 1 {
		t.Fatalf("put after the failure = %d, %v", n, err)
	}
	if got, err := s.DataBlock(kept.CID); err != nil || !bytes.Equal(got, kept.Data) {
		t.Fatalf("block put after the failure: %d bytes, %v", len(got), err)
	}
}

// TestDataWriterSyncAhead: a writer putting batch after batch syncs its
// pack in the background on the way and stores them all at the flush.
func TestDataWriterSyncAhead(t *testing.T) {
	s, w := openWriter(t)
	var all []Block
	for i := range 3 { // 36 MiB
		var batch []Block
		for j := range 48 {
			batch = append(batch, block(i*48+j, 256<<10))
		}
		if n, err := w.Put(batch); err != nil || n != len(batch) {
			t.Fatalf("put %d = %d, %v", i, n, err)
		}
		all = append(all, batch...)
	}
	if w.sync == nil {
		t.Fatal("no sync ahead started")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, b := range all {
		if got, err := s.DataBlock(b.CID); err != nil || !bytes.Equal(got, b.Data) {
			t.Fatalf("block %s: %d bytes, %v", b.CID, len(got), err)
		}
	}
}

// TestDataWriterKill: after kill -9, the blocks a writer flushed are
// stored and those it put after its flush are not (their pack bytes are
// there, pointed at by nothing); a new writer stores them again.
func TestDataWriterKill(t *testing.T) {
	flushed, put := block(1, 256<<10), block(2, 256<<10)
	if dir := os.Getenv("STORE_KILL_DIR"); dir != "" {
		killChild(dir, flushed, put)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDataWriterKill$")
	cmd.Env = append(os.Environ(), "STORE_KILL_DIR="+dir)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe() // the child waits on it to be killed
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child said %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	s, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.DataBlock(flushed.CID); err != nil || !bytes.Equal(got, flushed.Data) {
		t.Fatalf("flushed block: %d bytes, %v", len(got), err)
	}
	if _, err := s.DataBlock(put.CID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("block put and not flushed: %v; want ErrNotFound", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "packs", "00000001.pack")); err != nil || fi.Size() != 512<<10 {
		t.Fatalf("pack: %v, %v; want both blocks' bytes", fi, err)
	}
	if n, err := s.PutDataBlocks([]Block{put}, nil); err != nil || n != 1 {
		t.Fatalf("put after the kill = %d, %v; want 1 new", n, err)
	}
}

// killChild flushes one block, puts another, says ready and waits to be
// killed (its stdin never ends before).
func killChild(dir string, flushed, put Block) {
	s, err := Open(dir, nil)
	if err == nil {
		var w *DataWriter
		if w, err = s.NewDataWriter(nil); err == nil {
			if _, err = w.Put([]Block{flushed}); err == nil {
				if err = w.Flush(); err == nil {
					_, err = w.Put([]Block{put})
				}
			}
		}
	}
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(1)
}

// openWriter opens a store in a fresh directory and a DataWriter on it,
// both closed when the test ends.
func openWriter(t *testing.T) (*Store, *DataWriter) {
	t.Helper()
	s, err := Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	w, err := s.NewDataWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return s, w
}
