// Package hw owns the node's hardware inventory: how many CPUs, how much RAM
// and disk, and which NVIDIA GPUs this machine has. It is read once when the
// node starts; the result is what a machine reports in its heartbeats and the
// ceiling that node/config validates resource limits against.
//
// What is measured:
//
//   - CPUs: runtime.NumCPU, lowered to the cgroup CPU quota (cgroup v2
//     cpu.max or v1 cpu.cfs_quota_us, rounded up to whole CPUs) when the node
//     runs in a container with a smaller quota.
//   - MemoryMB: total RAM, MemTotal of /proc/meminfo, in MiB ("MB" in this
//     project always means 1024*1024 bytes).
//   - DiskMB: total size of the filesystem that holds the data dir (statfs).
//     When the data dir does not exist yet, its nearest existing parent is
//     measured.
//   - GPUs: through NVML (github.com/NVIDIA/go-nvml), sorted by index.
//
// GPUs are optional. Without the NVIDIA library (libnvidia-ml.so.1 cannot be
// loaded, or loading it panics) the machine simply has no GPUs: Detect logs
// one info line and goes on. When the library loads but NVML cannot be
// initialised (for example, no driver), Detect logs one warning and reports
// no GPUs. A single GPU that NVML cannot describe (lost, needs a reset) is
// skipped with a warning; the others are still reported, so indices may have
// gaps. GPU trouble never makes Detect fail: only the CPU, memory and disk
// measurements can.
//
// NVML is the narrow slice of go-nvml that Detect calls, so tests pass
// go-nvml's mock (pkg/nvml/mock/dgxa100) and the node passes SystemNVML().
// go-nvml needs cgo; so does this package. Memory and disk detection are
// implemented for Linux only.
package hw
