package store

import (
	"strings"
	"testing"
	"time"
)

// TestOpenWaitsForAStoreBeingReleased: a store another holder has is
// waited for (a node restarted right after kill -9), taken once released,
// and refused with one line when it is not released within LockWait.
func TestOpenWaitsForAStoreBeingReleased(t *testing.T) {
	lw := LockWait
	t.Cleanup(func() { LockWait = lw })
	dir := t.TempDir()
	first, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	LockWait = 200 * time.Millisecond
	if _, err := Open(dir, nil); err == nil || !strings.Contains(err.Error(), "in use by another process") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("open of a held store: %v; want one line saying it is in use", err)
	}
	LockWait = time.Minute
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(300 * time.Millisecond) // the holder goes away while Open waits
		first.Close()
	}()
	second, err := Open(dir, nil)
	<-released
	if err != nil {
		t.Fatalf("open after the holder let go: %v", err)
	}
	second.Close()
}
