//go:build linux

package hw

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// memTotalMB reads MemTotal (kB) from a meminfo file.
func memTotalMB(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			break
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("%s: bad MemTotal %q", path, rest)
		}
		if len(fields) > 1 && fields[1] != "kB" {
			return 0, fmt.Errorf("%s: MemTotal in unknown unit %q", path, fields[1])
		}
		return kb / 1024, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no MemTotal line", path)
}

// diskTotalMB is the total size of the filesystem holding dir, or holding its
// nearest existing parent when dir does not exist yet.
func diskTotalMB(dir string) (int64, error) {
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	p := abs
	for {
		var st syscall.Statfs_t
		err := syscall.Statfs(p, &st)
		if err == nil {
			return int64(st.Blocks * uint64(st.Bsize) / mib), nil
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, fs.ErrNotExist) || parent == p {
			return 0, fmt.Errorf("statfs %s: %w", p, err)
		}
		p = parent
	}
}

// cgroupCPUs returns the CPU quota of this process's cgroup rounded up to
// whole CPUs, and false when there is no quota (or it cannot be read).
// cgroupFile is normally /proc/self/cgroup and root /sys/fs/cgroup.
func cgroupCPUs(cgroupFile, root string) (int, bool) {
	data, err := os.ReadFile(cgroupFile)
	if err != nil {
		return 0, false
	}
	best := math.MaxInt
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		id, controllers, path := parts[0], parts[1], parts[2]
		switch {
		case id == "0" && controllers == "":
			// cgroup v2: the quota of the cgroup or of any ancestor applies.
			for _, dir := range ancestors(root, path) {
				if n, ok := cpuMaxV2(filepath.Join(dir, "cpu.max")); ok && n < best {
					best = n
				}
			}
		case hasController(controllers, "cpu"):
			// cgroup v1: the hierarchy may be mounted as cpu or cpu,cpuacct.
			for _, mount := range []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"} {
				for _, dir := range ancestors(filepath.Join(root, mount), path) {
					if n, ok := cfsQuotaV1(dir); ok && n < best {
						best = n
					}
				}
			}
		}
	}
	if best == math.MaxInt {
		return 0, false
	}
	return best, true
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// ancestors lists root/path, root/parent(path), ... , root. Inside a cgroup
// namespace the path is "/" and only root is listed.
func ancestors(root, path string) []string {
	path = filepath.Clean("/" + path)
	var dirs []string
	for {
		dirs = append(dirs, filepath.Join(root, path))
		if path == "/" {
			return dirs
		}
		path = filepath.Dir(path)
	}
}

// cpuMaxV2 parses a cgroup v2 cpu.max file: "max 100000" or "150000 100000".
func cpuMaxV2(file string) (int, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(data))
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	quota, err1 := strconv.ParseInt(f[0], 10, 64)
	period, err2 := strconv.ParseInt(f[1], 10, 64)
	return quotaCPUs(quota, period, err1 == nil && err2 == nil)
}

// cfsQuotaV1 reads cpu.cfs_quota_us (-1 = none) and cpu.cfs_period_us.
func cfsQuotaV1(dir string) (int, bool) {
	q, err1 := os.ReadFile(filepath.Join(dir, "cpu.cfs_quota_us"))
	p, err2 := os.ReadFile(filepath.Join(dir, "cpu.cfs_period_us"))
	if err1 != nil || err2 != nil {
		return 0, false
	}
	quota, err1 := strconv.ParseInt(strings.TrimSpace(string(q)), 10, 64)
	period, err2 := strconv.ParseInt(strings.TrimSpace(string(p)), 10, 64)
	return quotaCPUs(quota, period, err1 == nil && err2 == nil)
}

func quotaCPUs(quota, period int64, ok bool) (int, bool) {
	if !ok || quota <= 0 || period <= 0 {
		return 0, false
	}
	n := (quota + period - 1) / period
	if n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
}
