package jupyter

import (
	"crypto/rand"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func testKey(t testing.TB) (crypto.PrivKey, string) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id.String()
}

// TestTokenAgrees: the host machine and the renter derive the same token
// for a contract, each from its own key and the other's ID; another
// contract, another renter or another host gets another.
func TestTokenAgrees(t *testing.T) {
	host, hostID := testKey(t)
	renter, renterID := testKey(t)
	other, otherID := testKey(t)
	a, err := Token(host, renterID, "c1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Token(renter, hostID, "c1")
	if err != nil || a != b || len(a) != 43 {
		t.Fatalf("host %q, renter %q, %v", a, b, err)
	}
	for name, f := range map[string]func() (string, error){
		"other contract": func() (string, error) { return Token(host, renterID, "c2") },
		"other renter":   func() (string, error) { return Token(host, otherID, "c1") },
		"other host":     func() (string, error) { return Token(other, renterID, "c1") },
	} {
		if c, err := f(); err != nil || c == a {
			t.Errorf("%s: %q, %v", name, c, err)
		}
	}
	if _, err := Token(host, "not-a-peer", "c1"); err == nil {
		t.Error("a bad ID was accepted")
	}
}
