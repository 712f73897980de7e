package ledger

import (
	"fmt"
	"math"

	"github.com/cshare/cshare/market"
)

// Bounds on the figures entries carry that the fold keeps and the node
// adds or multiplies later (a machine's cores × its cpu limit, a run's
// start + its duration, dataset sizes). Each is far above any real value
// and far below where that arithmetic could overflow int64; the fold
// checks every one before it records it.
const (
	MaxMachineCPUs     = 1 << 16 // cores of one machine
	MaxMachineMemoryMB = 1 << 30 // 1 PiB of memory, in MB
	MaxMachineDiskMB   = 1 << 40 // 1 EiB of disk, in MB
	MaxMachineGPUs     = 1024    // devices of one machine
	MaxGPUIndex        = 1023
	MaxSlots           = 1 << 16 // a machine's max_concurrent_jobs
	MaxRunDurationMS   = market.MaxDuration
	MaxOutputSize      = 1 << 50 // bytes of one run's output: 1 PiB
	MaxDatasetSize     = 1 << 50 // bytes: 1 PiB
	MaxDatasetBlocks   = 1 << 40
)

// inRange is the one-line error for a figure outside lo..hi, or nil.
func inRange(field string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s: %d out of range; allowed %d..%d", field, v, lo, hi)
	}
	return nil
}

// ValidateMachineFigures checks the hardware and limits a machine.update
// declares; errors name the field.
func ValidateMachineFigures(h Hardware, l Limits) error {
	errs := []error{
		inRange("hardware.cpus", h.CPUs, 0, MaxMachineCPUs),
		inRange("hardware.memory_mb", h.MemoryMB, 0, MaxMachineMemoryMB),
		inRange("hardware.disk_mb", h.DiskMB, 0, MaxMachineDiskMB),
		inRange("hardware.gpus", int64(len(h.GPUs)), 0, MaxMachineGPUs),
		inRange("limits.cpu_limit", l.CPULimit, 0, 100),
		inRange("limits.memory_limit", l.MemoryLimit, 0, MaxMachineMemoryMB),
		inRange("limits.disk_limit", l.DiskLimit, 0, MaxMachineDiskMB),
		inRange("limits.max_concurrent_jobs", l.MaxConcurrentJobs, 0, MaxSlots),
		inRange("limits.gpus", int64(len(l.GPUs)), 0, MaxMachineGPUs),
	}
	for _, g := range h.GPUs {
		errs = append(errs, inRange("hardware.gpus.index", g.Index, 0, MaxGPUIndex),
			inRange("hardware.gpus.memory_mb", g.MemoryMB, 0, MaxMachineMemoryMB))
	}
	for _, g := range l.GPUs {
		errs = append(errs, inRange("limits.gpus.device", g.Device, 0, MaxGPUIndex),
			inRange("limits.gpus.memory", g.MemoryMB, 0, MaxMachineMemoryMB))
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// normalizeResult brings a reported run's figures into range: a result is
// a machine's account of a run that happened, and one figure out of range
// (a clock that jumped, a start time the runtime did not know) must not
// cost the batch's other results. A start outside 0..MaxTime is "not
// known" (0); a duration or output size is clamped to 0..its maximum; an
// exit code outside int32 reads as -1 (lost). Every node normalizes alike.
func normalizeResult(r ItemResult) ItemResult {
	if r.Started < 0 || r.Started > market.MaxTime {
		r.Started = 0
	}
	r.DurationMS = min(max(r.DurationMS, 0), MaxRunDurationMS)
	r.OutputSize = min(max(r.OutputSize, 0), MaxOutputSize)
	if r.Code < math.MinInt32 || r.Code > math.MaxInt32 {
		r.Code = -1
	}
	return r
}
