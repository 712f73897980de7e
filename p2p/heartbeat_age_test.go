package p2p

import (
	"bytes"
	"strings"
	"testing"

	"filippo.io/age"
)

// TestHeartbeatAgeRecipient: a heartbeat carries its machine's age
// recipient through encoding and signature; one without encodes without
// the key (as heartbeats did before it); a recipient that is not an age
// X25519 one is refused on decode with a line naming the field.
func TestHeartbeatAgeRecipient(t *testing.T) {
	k := ptKey(t)
	hb := ptSigned(t, ptOrg, k, 7)
	if bytes.Contains(ptEncode(t, hb), []byte("age")) {
		t.Fatal("a heartbeat without a recipient names the key")
	}
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	hb.Age = id.Recipient().String()
	if err := hb.Sign(ptOrg, k); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeVerifyHeartbeat(ptOrg, ptEncode(t, hb))
	if err != nil || got.Age != hb.Age {
		t.Fatalf("decode: %q, %v", got.Age, err)
	}
	got.Age = "age1" + strings.Repeat("q", 58)
	if err := got.Verify(ptOrg); err == nil {
		t.Fatal("age is not covered by the signature")
	}
	for _, bad := range []string{"age1nope", "ssh-ed25519 AAAA", strings.Repeat("a", 300), "AGE1" + strings.ToUpper(hb.Age[4:]) + "x"} {
		hb.Age = bad
		if err := hb.Sign(ptOrg, k); err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeVerifyHeartbeat(ptOrg, ptEncode(t, hb)); err == nil || !strings.Contains(err.Error(), "age: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("recipient %.20q: %v", bad, err)
		}
	}
}
