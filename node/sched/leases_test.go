package sched

import (
	"slices"
	"testing"

	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/p2p"
)

func TestLeaseClaims(t *testing.T) {
	hb := p2p.Heartbeat{Total: p2p.Resources{Slots: 2}, Instances: []p2p.RunningInstance{
		{Job: "j", Slot: 0, Item: 1}, {Job: "j", Slot: 0, Item: 2}, {Job: "j", Slot: 1, Item: 3},
		{Job: "j", Slot: 2, Item: 4}, {Job: "j", Slot: -1, Item: 5}, {Job: "j", Slot: -1, Kind: KindFinished, Item: 6},
		{Job: "j", Slot: -1, Kind: KindFinished, Item: 7},
	}}
	var items []int64
	for _, ri := range leaseClaims(hb) {
		items = append(items, ri.Item)
	}
	if !slices.Equal(items, []int64{1, 3, 6, 7}) {
		t.Errorf("leases %v, want [1 3 6 7]: one per slot it has, and the finished items", items)
	}
	// A machine claiming more slots than any node has, and more finished
	// items than a node lists, holds no more than those caps.
	hb = p2p.Heartbeat{Total: p2p.Resources{Slots: 1 << 40}}
	for i := int64(0); i < 4000; i++ {
		hb.Instances = append(hb.Instances, p2p.RunningInstance{Job: "j", Slot: i, Item: i}, p2p.RunningInstance{Job: "j", Slot: -1, Kind: KindFinished, Item: 10000 + i})
	}
	running, finished := 0, 0
	for _, ri := range leaseClaims(hb) {
		if ri.Kind == KindFinished {
			finished++
		} else {
			running++
		}
	}
	if running != config.MaxConcurrentJobsLimit || finished != MaxFinishedInBeat {
		t.Errorf("a liar holds %d running and %d finished items; caps %d and %d", running, finished, config.MaxConcurrentJobsLimit, MaxFinishedInBeat)
	}
}
