package market

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrAsk is the class of a request that does not fit its offer's shape.
var ErrAsk = errors.New("market: request does not fit the offer")

// Ask is what a renter asks of an offer. On an offer with GPUs the renter
// asks for GPUs and the CPU, memory and shm baselines follow; on an offer
// without GPUs the renter asks for CPUs and the memory and shm follow.
// DiskMB 0 means the same share of the offer's disk; Duration 0 means
// until the offer ends.
type Ask struct {
	GPUs     int64 `cbor:"gpus" json:"gpus"`
	CPUs     int64 `cbor:"cpus" json:"cpus"`
	DiskMB   int64 `cbor:"disk_mb" json:"disk_mb"`
	Duration int64 `cbor:"duration" json:"duration"`
}

// Alloc is what a contract holds on its host. GPUs are exclusive while
// the contract runs (or is requested); on an offer without GPUs, CPUs
// cores of the offer are likewise held. CPUMilli, MemoryMB and ShmMB are
// baselines, the contract's share of the offer: the instance may burst to
// the ceilings (the whole offer) while the machine is idle, and is held to
// its baseline under contention. DiskMB is fixed at creation.
type Alloc struct {
	GPUs            []int64 `cbor:"gpus,omitempty" json:"gpus"`
	CPUs            int64   `cbor:"cpus" json:"cpus"`
	CPUMilli        int64   `cbor:"cpu_milli" json:"cpu_milli"`
	MemoryMB        int64   `cbor:"memory_mb" json:"memory_mb"`
	ShmMB           int64   `cbor:"shm_mb" json:"shm_mb"`
	DiskMB          int64   `cbor:"disk_mb" json:"disk_mb"`
	CPUCeilingMilli int64   `cbor:"cpu_ceiling_milli" json:"cpu_ceiling_milli"`
	MemoryCeilingMB int64   `cbor:"memory_ceiling_mb" json:"memory_ceiling_mb"`
}

func askErr(field, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrAsk, field, fmt.Sprintf(format, a...))
}

// Shape is the allocation ask would get on o, without device indices: the
// share (GPUs asked of the offer's GPUs, or CPUs of its CPUs) of the
// offer's CPU, memory and shm, and the disk. It checks the ask against the
// offer's shape only; whether the resources are free is Open's business.
func Shape(o Offer, ask Ask) (Alloc, error) {
	var units, total int64
	if n := int64(len(o.GPUs)); n > 0 {
		if ask.CPUs != 0 {
			return Alloc{}, askErr("cpus", "the offer has GPUs: ask for gpus, and the CPU share follows them")
		}
		if ask.GPUs < 1 || ask.GPUs > n {
			return Alloc{}, askErr("gpus", "%d; the offer has %d GPUs: ask for 1..%d", ask.GPUs, n, n)
		}
		units, total = ask.GPUs, n
	} else {
		if ask.GPUs != 0 {
			return Alloc{}, askErr("gpus", "%d; the offer has no GPUs: ask for cpus", ask.GPUs)
		}
		if ask.CPUs < 1 || ask.CPUs > o.CPUs {
			return Alloc{}, askErr("cpus", "%d; the offer has %d CPUs: ask for 1..%d", ask.CPUs, o.CPUs, o.CPUs)
		}
		units, total = ask.CPUs, o.CPUs
	}
	a := Alloc{
		CPUMilli:        o.CPUs * 1000 * units / total,
		MemoryMB:        o.MemoryMB * units / total,
		ShmMB:           o.ShmMB() * units / total,
		DiskMB:          o.DiskMB * units / total,
		CPUCeilingMilli: o.CPUs * 1000,
		MemoryCeilingMB: o.MemoryMB,
	}
	if len(o.GPUs) == 0 {
		a.CPUs = units
	}
	switch {
	case ask.DiskMB < 0 || ask.DiskMB > o.DiskMB:
		return Alloc{}, askErr("disk", "%d MB; the offer has %d MB", ask.DiskMB, o.DiskMB)
	case ask.DiskMB > 0:
		a.DiskMB = ask.DiskMB
	}
	switch {
	case ask.Duration < 0 || ask.Duration > MaxDuration:
		return Alloc{}, askErr("duration", "%s; allowed up to 10 years (0: until the offer ends)", FormatDuration(ask.Duration))
	case ask.Duration > 0 && ask.Duration < o.MinDuration:
		return Alloc{}, askErr("duration", "%s; the offer's minimum is %s", FormatDuration(ask.Duration), FormatDuration(o.MinDuration))
	}
	return a, nil
}

// holders maps each GPU device of machine, and counts the cores of each
// CPU-only offer, held at now by contracts other than self: a GPU's holder
// is the earliest such contract in ledger order, so reasons are the same
// whatever the order of others.
type holders struct {
	gpu   map[int64]*Contract
	cores map[string]int64 // offer ID -> cores held
	disk  map[string]int64 // offer ID -> disk held (until deleted)
}

func heldBy(others []Contract, self *Contract, now int64, p Policy) holders {
	h := holders{gpu: map[int64]*Contract{}, cores: map[string]int64{}, disk: map[string]int64{}}
	for i := range others {
		c := &others[i]
		if c.ID == self.ID || c.Offer.Machine != self.Offer.Machine {
			continue
		}
		st := c.State(now, p)
		if st != StateRejected && st != StateDeleted && c.Offer.ID == self.Offer.ID {
			h.disk[c.Offer.ID] += c.Alloc.DiskMB
		}
		if st != StateRequested && st != StateRunning {
			continue
		}
		for _, g := range c.Alloc.GPUs {
			if prev := h.gpu[g]; prev == nil || c.before(prev) {
				h.gpu[g] = c
			}
		}
		h.cores[c.Offer.ID] += c.Alloc.CPUs
	}
	return h
}

// conflict names what keeps c's resources from being held by c at now.
func (h holders) conflict(c *Contract) error {
	var held []string
	for _, g := range c.Alloc.GPUs {
		if by := h.gpu[g]; by != nil {
			held = append(held, fmt.Sprintf("GPU %d is held by contract %s", g, by.ID))
		}
	}
	if len(held) > 0 {
		return errors.New(strings.Join(held, ", "))
	}
	if c.Alloc.CPUs > 0 {
		if free := c.Offer.CPUs - h.cores[c.Offer.ID]; free < c.Alloc.CPUs {
			return fmt.Errorf("%d CPUs asked, %d of the offer's %d free", c.Alloc.CPUs, max(free, 0), c.Offer.CPUs)
		}
	}
	return nil
}

// pickGPUs gives c the lowest-indexed free devices of its offer.
func (h holders) pickGPUs(c *Contract, n int64) error {
	var free []int64
	var busy []string
	for _, g := range c.Offer.GPUs {
		if by := h.gpu[g.Index]; by != nil {
			busy = append(busy, fmt.Sprintf("GPU %d by %s", g.Index, by.ID))
			continue
		}
		free = append(free, g.Index)
	}
	if int64(len(free)) < n {
		return fmt.Errorf("%d GPUs asked, %d free (held: %s)", n, len(free), strings.Join(busy, ", "))
	}
	c.Alloc.GPUs = slices.Clone(free[:n])
	return nil
}

// FormatGPUs prints device indices as "0,1,3" ("-" for none).
func FormatGPUs(gpus []int64) string {
	if len(gpus) == 0 {
		return "-"
	}
	parts := make([]string, len(gpus))
	for i, g := range gpus {
		parts[i] = strconv.FormatInt(g, 10)
	}
	return strings.Join(parts, ",")
}
