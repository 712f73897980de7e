package node

import (
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/runtime/hw"
)

func toLedgerHW(h hw.Hardware) ledger.Hardware {
	out := ledger.Hardware{CPUs: int64(h.CPUs), MemoryMB: h.MemoryMB, DiskMB: h.DiskMB}
	for _, g := range h.GPUs {
		out.GPUs = append(out.GPUs, ledger.GPU{Index: int64(g.Index), UUID: g.UUID, Name: g.Name, MemoryMB: g.MemoryMB})
	}
	return out
}

func toLedgerLimits(l config.Limits) ledger.Limits {
	out := ledger.Limits{CPULimit: int64(l.CPULimit), MemoryLimit: l.MemoryLimit, DiskLimit: l.DiskLimit, MaxConcurrentJobs: int64(l.MaxConcurrentJobs)}
	for _, g := range l.GPUs {
		out.GPUs = append(out.GPUs, ledger.GPULimit{Device: int64(g.Device), MemoryMB: g.MemoryMB})
	}
	return out
}
