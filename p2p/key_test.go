package p2p

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "node.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if k1.Type() != crypto.Ed25519 {
		t.Fatalf("key type %v", k1.Type())
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", st.Mode().Perm())
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	id1, _ := peer.IDFromPrivateKey(k1)
	id2, _ := peer.IDFromPrivateKey(k2)
	if id1 != id2 {
		t.Fatalf("peer ID changed across loads: %s vs %s", id1, id2)
	}
	// Loose permissions are tightened.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(path); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Fatalf("mode not tightened: %v", st.Mode().Perm())
	}
	// A corrupt file is an error, never silently replaced.
	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(bad); err == nil {
		t.Fatal("corrupt key accepted")
	}
}

func TestLoadOrCreateKeyRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.key")
	ids := make([]peer.ID, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k, err := LoadOrCreateKey(path)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i], _ = peer.IDFromPrivateKey(k)
		}(i)
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("racing creators got different keys")
		}
	}
}
