package hw

import (
	"fmt"
	"log/slog"
	"runtime"
	"sort"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPU is one NVIDIA GPU as NVML reports it.
type GPU struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid"`
	Name     string `json:"name"`
	MemoryMB int64  `json:"memory_mb"`
}

// Hardware is the inventory of one machine.
type Hardware struct {
	CPUs     int   `json:"cpus"`
	MemoryMB int64 `json:"memory_mb"`
	DiskMB   int64 `json:"disk_mb"`
	GPUs     []GPU `json:"gpus"`
}

// NVML is the part of go-nvml's nvml.Interface that Detect uses. Both the
// real library (SystemNVML) and go-nvml's mocks satisfy it. Of each
// nvml.Device, Detect calls only GetUUID, GetName and GetMemoryInfo.
type NVML interface {
	Init() nvml.Return
	Shutdown() nvml.Return
	DeviceGetCount() (int, nvml.Return)
	DeviceGetHandleByIndex(index int) (nvml.Device, nvml.Return)
}

// SystemNVML returns the machine's NVML library (libnvidia-ml.so.1). It is
// loaded lazily by Init, so calling SystemNVML is safe on any machine; on a
// machine without the library, Detect reports no GPUs.
func SystemNVML() NVML {
	return nvml.New()
}

// NoLibraryMessage is the one info line Detect logs when the NVIDIA library
// cannot be loaded.
const NoLibraryMessage = "no NVIDIA library; this machine has no GPUs"

const mib = 1024 * 1024

// Detect measures this machine. dataDir is the node's data directory; the
// disk figure is the size of the filesystem holding it ("" means the current
// directory). nv may be nil, which skips GPU detection; log may be nil, which
// means slog.Default(). Detect fails only when CPU, memory or disk cannot be
// measured; GPU problems are logged and leave the GPU list short or empty.
func Detect(dataDir string, nv NVML, log *slog.Logger) (Hardware, error) {
	if log == nil {
		log = slog.Default()
	}
	var h Hardware
	h.CPUs = runtime.NumCPU()
	if q, ok := cgroupCPUs("/proc/self/cgroup", "/sys/fs/cgroup"); ok && q < h.CPUs {
		h.CPUs = q
	}
	mem, err := memTotalMB("/proc/meminfo")
	if err != nil {
		return Hardware{}, fmt.Errorf("hw: memory: %w", err)
	}
	h.MemoryMB = mem
	disk, err := diskTotalMB(dataDir)
	if err != nil {
		return Hardware{}, fmt.Errorf("hw: disk: %w", err)
	}
	h.DiskMB = disk
	h.GPUs = detectGPUs(nv, log)
	return h, nil
}

// detectGPUs lists the GPUs NVML can see. It never fails and never panics:
// see the package doc for what it logs.
func detectGPUs(nv NVML, log *slog.Logger) (gpus []GPU) {
	if nv == nil {
		return []GPU{}
	}
	initialised := false
	defer func() {
		if r := recover(); r != nil {
			gpus = []GPU{}
			if initialised {
				log.Warn("GPU detection failed; this machine has no GPUs", "panic", fmt.Sprint(r))
			} else {
				log.Info(NoLibraryMessage, "panic", fmt.Sprint(r))
			}
		}
	}()
	switch ret := nv.Init(); ret {
	case nvml.SUCCESS:
		initialised = true
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		log.Info(NoLibraryMessage)
		return []GPU{}
	default:
		log.Warn("NVIDIA library found but NVML did not start; this machine has no GPUs", "error", ret.Error())
		return []GPU{}
	}
	// Shutdown only after a successful Init: the real binding calls into
	// unresolved C symbols otherwise.
	defer func() {
		if ret := nv.Shutdown(); ret != nvml.SUCCESS {
			log.Warn("NVML shutdown", "error", ret.Error())
		}
	}()

	n, ret := nv.DeviceGetCount()
	if ret != nvml.SUCCESS {
		log.Warn("NVML cannot count GPUs; this machine has no GPUs", "error", ret.Error())
		return []GPU{}
	}
	gpus = make([]GPU, 0, n)
	for i := 0; i < n; i++ {
		g, err := describe(nv, i)
		if err != nil {
			log.Warn("GPU skipped", "index", i, "error", err.Error())
			continue
		}
		gpus = append(gpus, g)
	}
	sort.Slice(gpus, func(a, b int) bool { return gpus[a].Index < gpus[b].Index })
	return gpus
}

func describe(nv NVML, i int) (GPU, error) {
	d, ret := nv.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("DeviceGetHandleByIndex: %s", ret.Error())
	}
	if d == nil {
		return GPU{}, fmt.Errorf("DeviceGetHandleByIndex: no device")
	}
	uuid, ret := d.GetUUID()
	if ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("GetUUID: %s", ret.Error())
	}
	name, ret := d.GetName()
	if ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("GetName: %s", ret.Error())
	}
	mem, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return GPU{}, fmt.Errorf("GetMemoryInfo: %s", ret.Error())
	}
	return GPU{Index: i, UUID: uuid, Name: name, MemoryMB: int64(mem.Total / mib)}, nil
}

// NoNVML is an NVML without the library: a machine with no GPUs (tests,
// benchmarks, and machines where the owner wants none found).
type NoNVML struct{}

func (NoNVML) Init() nvml.Return                  { return nvml.ERROR_LIBRARY_NOT_FOUND }
func (NoNVML) Shutdown() nvml.Return              { return nvml.SUCCESS }
func (NoNVML) DeviceGetCount() (int, nvml.Return) { return 0, nvml.ERROR_LIBRARY_NOT_FOUND }
func (NoNVML) DeviceGetHandleByIndex(int) (nvml.Device, nvml.Return) {
	return nil, nvml.ERROR_LIBRARY_NOT_FOUND
}
