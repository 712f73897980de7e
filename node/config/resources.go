package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/cshare/cshare/runtime/hw"
)

// Resources is the resources: section.
type Resources struct {
	CPULimit          *int   // percent
	MemoryLimit       *int64 // MB
	DiskLimit         *int64 // MB
	MaxConcurrentJobs *int
	// GPUs is nil when the key is absent or null (offer every detected GPU),
	// and non-nil but empty for "gpus: []" (offer none).
	GPUs []GPU
}

// GPU is one entry of resources.gpus.
type GPU struct {
	Device   int
	MemoryMB *int64 // nil = all of the GPU's memory
}

func (p *parser) resources(n *yaml.Node, path string) (Resources, error) {
	var r Resources
	entries, err := p.mapping(n, path, "cpu_limit", "memory_limit", "disk_limit", "max_concurrent_jobs", "gpus")
	if err != nil {
		return r, err
	}
	for _, e := range entries {
		switch e.name {
		case "cpu_limit":
			v, err := p.percent(e)
			if err != nil {
				return r, err
			}
			r.CPULimit = &v
		case "memory_limit":
			v, err := p.sizeMB(e)
			if err != nil {
				return r, err
			}
			r.MemoryLimit = &v
		case "disk_limit":
			v, err := p.sizeMB(e)
			if err != nil {
				return r, err
			}
			r.DiskLimit = &v
		case "max_concurrent_jobs":
			v, err := p.bounded(e.value, e.path, fmt.Sprintf("0..%d (0 means this machine takes no jobs)", MaxConcurrentJobsLimit))
			if err != nil {
				return r, err
			}
			c := clampInt(v)
			r.MaxConcurrentJobs = &c
		case "gpus":
			if r.GPUs, err = p.gpus(e.value, e.path); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

func (p *parser) gpus(n *yaml.Node, path string) ([]GPU, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, p.errf(n, path, "is %s; expected a list of {device, memory}", kindName(n))
	}
	out := make([]GPU, 0, len(n.Content))
	for i, item := range n.Content {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		item = deref(item)
		if isNull(item) || item.Kind != yaml.MappingNode {
			what := "empty"
			if !isNull(item) {
				what = kindName(item)
			}
			return nil, p.errf(item, ipath, "is %s; expected a mapping with device and optional memory", what)
		}
		p.lines[ipath] = item.Line
		entries, err := p.mapping(item, ipath, "device", "memory")
		if err != nil {
			return nil, err
		}
		var g GPU
		hasDevice := false
		for _, e := range entries {
			switch e.name {
			case "device":
				v, err := p.integer(e.value, e.path)
				if err != nil {
					return nil, err
				}
				g.Device, hasDevice = clampInt(v), true
			case "memory":
				v, err := p.sizeMB(e)
				if err != nil {
					return nil, err
				}
				g.MemoryMB = &v
			}
		}
		if !hasDevice {
			return nil, p.errf(item, ipath+".device", "is missing; give the GPU's index (0, 1, ...)")
		}
		out = append(out, g)
	}
	return out, nil
}

// Limits are the effective resource limits of this node: the config with
// defaults applied, validated against the hardware. GPUs are sorted by
// device.
type Limits struct {
	CPULimit          int        `json:"cpu_limit"`    // percent
	MemoryLimit       int64      `json:"memory_limit"` // MB
	DiskLimit         int64      `json:"disk_limit"`   // MB
	MaxConcurrentJobs int        `json:"max_concurrent_jobs"`
	GPUs              []GPULimit `json:"gpus,omitempty"`
}

// GPULimit is one GPU this node offers and how much of its memory.
type GPULimit struct {
	Device   int   `json:"device"`
	MemoryMB int64 `json:"memory"`
}

// Cores is the usable CPU in millicores: CPUs*1000*cpu_limit/100.
func (l Limits) Cores(h hw.Hardware) int64 {
	return int64(h.CPUs) * 1000 * int64(l.CPULimit) / 100
}

// Limits applies the defaults to f and checks it against the hardware h. The
// error names the key and what this machine allows.
func (f File) Limits(h hw.Hardware) (Limits, error) {
	if err := f.check(); err != nil {
		return Limits{}, err
	}
	if _, err := f.DiskReserveMB(h); err != nil {
		return Limits{}, err
	}
	r := f.Resources
	l := Limits{CPULimit: 100, MemoryLimit: h.MemoryMB, DiskLimit: h.DiskMB, MaxConcurrentJobs: min(max(h.CPUs, 0), MaxConcurrentJobsLimit)}
	if r.CPULimit != nil {
		l.CPULimit = *r.CPULimit
	}
	if r.MaxConcurrentJobs != nil {
		l.MaxConcurrentJobs = *r.MaxConcurrentJobs
	}
	var err error
	if r.MemoryLimit != nil {
		if l.MemoryLimit, err = f.checkMB("resources.memory_limit", *r.MemoryLimit, h.MemoryMB, "this machine"); err != nil {
			return Limits{}, err
		}
	}
	if r.DiskLimit != nil {
		if l.DiskLimit, err = f.checkMB("resources.disk_limit", *r.DiskLimit, h.DiskMB, "the data dir's disk"); err != nil {
			return Limits{}, err
		}
	}
	if r.GPUs == nil {
		for _, g := range h.GPUs {
			l.GPUs = append(l.GPUs, GPULimit{Device: g.Index, MemoryMB: g.MemoryMB})
		}
	}
	for i, want := range r.GPUs {
		key := fmt.Sprintf("resources.gpus[%d]", i)
		g, ok := findGPU(h, want.Device)
		if !ok {
			return Limits{}, f.errAt(key+".device", "%d is not present; this machine has %s", want.Device, describeGPUs(h))
		}
		mem := g.MemoryMB
		if want.MemoryMB != nil {
			if mem, err = f.checkMB(key+".memory", *want.MemoryMB, g.MemoryMB, fmt.Sprintf("GPU %d", g.Index)); err != nil {
				return Limits{}, err
			}
		}
		l.GPUs = append(l.GPUs, GPULimit{Device: g.Index, MemoryMB: mem})
	}
	sort.Slice(l.GPUs, func(a, b int) bool { return l.GPUs[a].Device < l.GPUs[b].Device })
	return l, nil
}

// checkMB checks 0 < v <= total.
func (f File) checkMB(key string, v, total int64, owner string) (int64, error) {
	switch {
	case v < 0:
		return 0, f.errAt(key, "%d is negative; allowed: 0 < value <= %d", v, total)
	case v == 0:
		return 0, f.errAt(key, "0 is not allowed; allowed: 0 < value <= %d", total)
	case v > total:
		return 0, f.errAt(key, "%d MB is more than %s has (%d MB)", v, owner, total)
	}
	return v, nil
}

func findGPU(h hw.Hardware, index int) (hw.GPU, bool) {
	for _, g := range h.GPUs {
		if g.Index == index {
			return g, true
		}
	}
	return hw.GPU{}, false
}

// describeGPUs says which GPU indices h has: "no GPUs", "GPU 0",
// "GPUs 0..1", "GPUs 0..2, 4..7".
func describeGPUs(h hw.Hardware) string {
	if len(h.GPUs) == 0 {
		return "no GPUs"
	}
	idx := make([]int, 0, len(h.GPUs))
	for _, g := range h.GPUs {
		idx = append(idx, g.Index)
	}
	sort.Ints(idx)
	if len(idx) == 1 {
		return fmt.Sprintf("GPU %d", idx[0])
	}
	var parts []string
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(idx[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d..%d", idx[i], idx[j]))
		}
		i = j + 1
	}
	return "GPUs " + strings.Join(parts, ", ")
}
