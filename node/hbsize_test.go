package node

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/node/sched"
	"github.com/cshare/cshare/p2p"
)

// TestLargestHeartbeatFits: a machine with the most slots allowed, every one
// running, the most finished items and dataset fetches a heartbeat lists, still publishes a
// heartbeat under the gossip size limit (over it, the machine would go
// Offline for everyone).
func TestLargestHeartbeatFits(t *testing.T) {
	hb := p2p.Heartbeat{Machine: "12D3KooWQYhTNQdmr3ArTeUHRYzFg94BKyTkoWBDWez9kSCVe2Xo", Seq: 1 << 62, Time: 1 << 42, Interval: 30000,
		Name: "a-rather-long-machine-name-01", Version: Version, Sig: make([]byte, 64), PlanHash: fmt.Sprintf("%064x", 1), DiskFull: true,
		SSH:   &p2p.SSHGateway{Port: 65535, HostKey: strings.Repeat("A", p2p.MaxSSHHostKey)},
		Relay: true, Age: "age1" + strings.Repeat("q", 58), // an X25519 recipient is 62 characters
		Barrier: 1 << 40,
		Total:   p2p.Resources{Cores: 1 << 20, MemoryMB: 1 << 22, DiskMB: 1 << 24, GPUs: 8, Slots: config.MaxConcurrentJobsLimit}}
	for k := 0; k < 4; k++ {
		hb.Addrs = append(hb.Addrs, "/ip6/2001:db8:ffff:ffff:ffff:ffff:ffff:ffff/udp/65535/quic-v1")
		hb.Heads = append(hb.Heads, "bafyreigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi")
	}
	hb.Free = hb.Total
	hb.Jupyter = &p2p.JupyterProxy{Port: 65535, Cert: strings.Repeat("A", p2p.MaxJupyterCert)}
	hb.JupyterDirect = map[string]int64{}
	for i := 0; i < p2p.MaxJupyterDirect; i++ {
		hb.JupyterDirect[fmt.Sprintf("%0*d", p2p.MaxJupyterDirectID, i)] = 65535
	}
	for i := 0; i < config.MaxConcurrentJobsLimit; i++ {
		hb.Instances = append(hb.Instances, p2p.RunningInstance{Job: "0123456789ab", Slot: int64(i), Kind: "secondary", Item: 1 << 40,
			Instance: fmt.Sprintf("0123456789ab-s%d-%d", i, 999999999), Started: 1 << 42,
			CPUMilli: 1 << 20, MemoryMB: 1 << 22, OOMKilled: true})
	}
	for i := 0; i < sched.MaxFinishedInBeat; i++ {
		hb.Instances = append(hb.Instances, p2p.RunningInstance{Job: "0123456789ab", Slot: -1, Kind: sched.KindFinished, Item: 1 << 40,
			Instance: fmt.Sprintf("0123456789ab-s%d-%d", i, 999999999)})
	}
	for i := 0; i < p2p.MaxFetches; i++ {
		hb.Fetches = append(hb.Fetches, p2p.DatasetFetch{CID: "bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi", Have: 1 << 50, Size: 1 << 50})
	}
	b, err := p2p.EncodeHeartbeat(&hb)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > p2p.MaxPayloadSize {
		t.Fatalf("largest heartbeat is %d bytes, limit %d", len(b), p2p.MaxPayloadSize)
	}
	t.Logf("largest heartbeat: %d of %d bytes", len(b), p2p.MaxPayloadSize)
}
