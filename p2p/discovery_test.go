package p2p

import (
	"strings"
	"testing"
)

// TestMDNSService: one name per org, not showing the org ID, within DNS-SD's
// 15-character service label.
func TestMDNSService(t *testing.T) {
	a, b := MDNSService("bafyorgA"), MDNSService("bafyorgB")
	if a == b || a != MDNSService("bafyorgA") {
		t.Fatalf("names %q %q", a, b)
	}
	label := strings.TrimSuffix(strings.TrimPrefix(a, "_"), "._udp")
	if !strings.HasPrefix(a, "_cshare-") || !strings.HasSuffix(a, "._udp") || len(label) > 15 || strings.Contains(a, "bafyorgA") {
		t.Fatalf("name %q (label %q)", a, label)
	}
}
