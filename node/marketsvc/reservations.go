package marketsvc

import (
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/smartshare"
)

// Reservations is what running contracts hold at now, by host
// machine, computed from the ledger alone so every node takes the same out
// of the same machines before SmartShare plans (issue 18, docs/design.md §14).
//
// now is the plan's time, the one SmartShare's input is built at anyway
// (liveness is read at it too), not a ledger time: a contract ends with no
// entry written, so only the clock can say it has. Every boundary it is
// compared with is a ledger time (the host's signed accept, extension,
// the renter's stop and start), so two nodes that plan at the same moment
// compute the same reservations, and nodes whose clocks disagree by d
// disagree only during the d around a boundary, as they already do about
// liveness. The host's node, which runs the instances, reads the same
// ledger at its own clock (host.go).
func Reservations(st *ledger.State, now time.Time) map[string]market.Reservation {
	out := map[string]market.Reservation{}
	for _, r := range ledger.ContractReservations(st, now.UnixMilli()) {
		out[r.Machine] = r
	}
	return out
}

// LessReserved is a machine's capacity for jobs once its running contracts
// have what they hold: a slot per whole core of their CPU baselines, the
// cores, memory and GPUs. A declared resource the contracts take entirely
// leaves the machine no slot (0 would read as "not declared").
func LessReserved(mc smartshare.Machine, r market.Reservation) smartshare.Machine {
	if r.Contracts == 0 {
		return mc
	}
	mc.Slots = max(0, mc.Slots-int(r.Slots))
	mc.GPUs = max(0, mc.GPUs-len(r.GPUs))
	if mc.Cores > 0 {
		if mc.Cores -= r.CPUMilli; mc.Cores <= 0 {
			mc.Cores, mc.Slots = 1, 0
		}
	}
	if mc.MemoryMB > 0 {
		if mc.MemoryMB -= r.MemoryMB; mc.MemoryMB <= 0 {
			mc.MemoryMB, mc.Slots = 1, 0
		}
	}
	return mc
}
