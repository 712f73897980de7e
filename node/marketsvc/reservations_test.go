package marketsvc

import (
	"testing"

	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/smartshare"
)

func TestLessReserved(t *testing.T) {
	m := smartshare.Machine{ID: "m", Slots: 16, Cores: 16000, MemoryMB: 65536, GPUs: 4}
	for _, tc := range []struct {
		name string
		r    market.Reservation
		want smartshare.Machine
	}{
		{"none", market.Reservation{}, m},
		{"one GPU of four", market.Reservation{Machine: "m", Contracts: 1, Slots: 4, CPUMilli: 4000, MemoryMB: 16384, GPUs: []int64{0}},
			smartshare.Machine{ID: "m", Slots: 12, Cores: 12000, MemoryMB: 49152, GPUs: 3}},
		{"everything", market.Reservation{Machine: "m", Contracts: 2, Slots: 16, CPUMilli: 16000, MemoryMB: 65536, GPUs: []int64{0, 1, 2, 3}},
			smartshare.Machine{ID: "m", Slots: 0, Cores: 1, MemoryMB: 1, GPUs: 0}},
	} {
		if got := LessReserved(m, tc.r); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// Undeclared resources stay undeclared (0: unconstrained).
	bare := smartshare.Machine{ID: "m", Slots: 8}
	if got := LessReserved(bare, market.Reservation{Contracts: 1, Slots: 2, CPUMilli: 1500, MemoryMB: 10}); got != (smartshare.Machine{ID: "m", Slots: 6}) {
		t.Errorf("bare: %+v", got)
	}
}
