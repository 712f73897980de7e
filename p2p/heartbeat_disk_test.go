package p2p

import (
	"bytes"
	"testing"
)

// TestHeartbeatDiskFull: a heartbeat says whether its machine's disk is
// full, through encoding and signature; one whose disk has room encodes
// without the key, as heartbeats did before it existed (older nodes, which
// refuse unknown keys, still take it).
func TestHeartbeatDiskFull(t *testing.T) {
	k := ptKey(t)
	hb := ptSigned(t, ptOrg, k, 42)
	if bytes.Contains(ptEncode(t, hb), []byte("disk_full")) {
		t.Fatal("a heartbeat with room names disk_full")
	}
	hb.DiskFull = true
	if err := hb.Sign(ptOrg, k); err != nil {
		t.Fatal(err)
	}
	got, err := DecodeVerifyHeartbeat(ptOrg, ptEncode(t, hb))
	if err != nil {
		t.Fatal(err)
	}
	if !got.DiskFull {
		t.Fatal("disk_full lost on the way")
	}
	got.DiskFull = false
	if err := got.Verify(ptOrg); err == nil {
		t.Fatal("disk_full is not covered by the signature")
	}
}
