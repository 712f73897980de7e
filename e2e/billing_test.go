//go:build e2e

package e2e

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

type billedContract struct {
	State          string  `json:"state"`
	Cost           float64 `json:"cost"`
	ComputeCost    float64 `json:"compute_cost"`
	StorageCost    float64 `json:"storage_cost"`
	RunningSeconds float64 `json:"running_seconds"`
}

// TestContractBilledBySecond (issue 30): a one-hour rental at $3.60/h
// ($0.001 a second), stopped by its renter once it has run 10 s, costs
// about 10 s of compute, not the hour: the host acknowledges the stop in
// the ledger and a third machine witnesses it, and every node prints the
// same costs for the same time, settled (an hour later costs the same).
// Its storage ($100 per GB-month here) is billed while it exists, stopped
// too; removed, it costs no storage after.
func TestContractBilledBySecond(t *testing.T) {
	dockerAvailable(t)
	ps := mesh(t, 3)
	host, renter := ps[0], ps[1]
	var hostSt status
	host.json(&hostSt, "node", "status")
	t.Cleanup(func() { removeContainersOf(hostSt.ID) })
	var offer string
	eventually(t, 20*time.Second, "the host can offer", func() bool {
		out, _, code := host.cli("offer", "create", "--price", "3.6", "--disk-price", "100", "--cpus", "1", "--memory", "64m", "--disk", "1g", "--for", "2h")
		offer = lastLine(out)
		return code == 0
	})
	var id string
	eventually(t, 20*time.Second, "the renter rents it for an hour", func() bool {
		out, _, code := renter.cli("contract", "create", offer[:8], "--image", "cshare-busybox:latest", "--cpus", "1", "--for", "1h", "--", "sleep", "3600")
		id = lastLine(out)
		return code == 0
	})
	show := func(p *proc) billedContract {
		var c billedContract
		p.json(&c, "contract", "show", id)
		return c
	}
	eventually(t, 60*time.Second, "the contract has run 10 s", func() bool { return show(renter).RunningSeconds >= 10 })
	renter.must("contract", "stop", id)
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	type usage struct {
		Renters []struct {
			ComputeCost float64 `json:"compute_cost"`
			StorageCost float64 `json:"storage_cost"`
		} `json:"renters"`
	}
	var settled string
	eventually(t, 30*time.Second, "the stop acknowledged: the same settled cost on every node", func() bool {
		var first string
		for _, p := range ps {
			out := p.must("contract", "usage", "--at", at, "--json")
			var u usage
			if err := json.Unmarshal([]byte(out), &u); err != nil || len(u.Renters) != 1 {
				return false
			}
			// Billed at the acknowledgement, not 30 s after the request.
			if u.Renters[0].ComputeCost > 0.016 {
				return false
			}
			if first == "" {
				first = out
			} else if out != first {
				return false
			}
		}
		settled = first
		return true
	})
	c := show(renter)
	if c.State != "stopped" || c.RunningSeconds < 10 || c.RunningSeconds > 16 {
		t.Fatalf("stopped after 10 s of an hour: %+v", c)
	}
	if want := c.RunningSeconds * 0.001; math.Abs(c.ComputeCost-want) > 0.000002 {
		t.Fatalf("compute $%f for %.3f s at $0.001/s, want $%f", c.ComputeCost, c.RunningSeconds, want)
	}
	t.Logf("stopped after 10 s of an hour: ran %.3f s, compute $%.6f (the hour: $3.60), settled usage %s", c.RunningSeconds, c.ComputeCost, strings.Join(strings.Fields(settled), " "))

	// Removed: no storage after.
	renter.must("contract", "rm", id)
	later := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	eventually(t, 30*time.Second, "the removal settled: costs an hour later are the same as two hours later", func() bool {
		a := renter.must("contract", "usage", "--at", at, "--json")
		b := renter.must("contract", "usage", "--at", later, "--json")
		var ua, ub usage
		_ = json.Unmarshal([]byte(a), &ua)
		_ = json.Unmarshal([]byte(b), &ub)
		return len(ua.Renters) == 1 && len(ub.Renters) == 1 && ua.Renters[0] == ub.Renters[0] && ua.Renters[0].StorageCost > 0
	})
}
