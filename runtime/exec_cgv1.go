package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroup v1, for hosts that have no cgroup v2 hierarchy with the cpu and
// memory controllers (the "hybrid" layout: v1 controllers under
// /sys/fs/cgroup/<controller>, an empty v2 tree beside them). Each
// controller is a hierarchy of its own, so a run gets one group per
// controller, named like its v2 group, under <mount>/<the node's own
// group>/cshare (so runs stay inside whatever limits the node itself runs
// under, a systemd unit's or a container's), and the
// wrapper joins every one of them before it starts the command:
//
//	memory   memory.limit_in_bytes (MemoryBytes), memory.soft_limit_in_bytes
//	         (MemoryReservationBytes); OOM kills from memory.oom_control
//	cpu      cpu.cfs_quota_us over cpu.cfs_period_us (NanoCPUs)
//	pids     pids.max (PidsLimit), where the controller is mounted
//	cpuacct  CPU time for Stats, where it is mounted apart from cpu

// cgV1 is one v1 hierarchy the driver uses: the controllers mounted
// there (cpu and cpuacct may share one) and the cshare group in it.
type cgV1 struct {
	ctrls []string
	base  string
}

// v1Controllers are the controllers runs join, the first two required.
var v1Controllers = []string{"memory", "cpu", "pids", "cpuacct"}

// setupCgroupsV1 finds the v1 mounts of the controllers in mountinfo
// (/proc/self/mountinfo) and the node's own groups in self
// (/proc/self/cgroup), and makes the cshare group under each; reason says
// why not when it cannot.
func setupCgroupsV1(mountinfo, self string) (ctrls []cgV1, reason string) {
	mounts := v1Mounts(mountinfo)
	own := v1Own(self)
	seen := map[string]int{} // base -> index in ctrls
	for _, c := range v1Controllers {
		mnt := mounts[c]
		if mnt == "" {
			if c == "memory" || c == "cpu" {
				return nil, fmt.Sprintf("no cgroup v1 %s controller mounted", c)
			}
			continue
		}
		base := filepath.Join(mnt, own[c], "cshare")
		if i, ok := seen[base]; ok {
			ctrls[i].ctrls = append(ctrls[i].ctrls, c) // co-mounted with one before (cpu,cpuacct)
			continue
		}
		seen[base] = len(ctrls)
		if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Sprintf("cannot create cgroup v1 %s: %v", base, err)
		}
		probe := filepath.Join(base, "probe-"+strconv.Itoa(os.Getpid()))
		if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Sprintf("cannot create a child cgroup in %s: %v", base, err)
		}
		_ = os.Remove(probe)
		ctrls = append(ctrls, cgV1{ctrls: []string{c}, base: base})
	}
	return ctrls, ""
}

// v1Mounts maps each v1 controller to its mount point, from the text of
// /proc/self/mountinfo ("... MOUNTPOINT ... - cgroup SRC rw,memory").
func v1Mounts(mountinfo string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(mountinfo))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || g[0] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(g[2], ",") {
			for _, c := range v1Controllers {
				if opt == c && out[c] == "" {
					out[c] = f[4]
				}
			}
		}
	}
	return out
}

// v1Own maps each v1 controller to the node's own group in it, from the
// text of /proc/self/cgroup ("4:memory:/system.slice/cshare.service").
func v1Own(self string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(self, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			p := filepath.Clean("/" + parts[2])
			if strings.Contains(p, "..") {
				p = "/"
			}
			out[c] = p
		}
	}
	return out
}

// createRunCgroupV1 makes the run's group in each hierarchy and writes
// the spec's limits; it returns the groups' dirs by controller.
func createRunCgroupV1(hs []cgV1, id RunID, s Spec) (map[string]string, error) {
	dirs := map[string]string{}
	fail := func(err error) (map[string]string, error) {
		removeCgroupV1(dirs)
		return nil, err
	}
	for _, h := range hs {
		dir := filepath.Join(h.base, string(id))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fail(fmt.Errorf("create cgroup %s: %w", dir, err))
		}
		var writes [][2]string
		for _, c := range h.ctrls {
			dirs[c] = dir
			writes = append(writes, v1Limits(c, s)...)
		}
		for _, w := range writes {
			if err := writeCgroupFile(filepath.Join(dir, w[0]), w[1]); err != nil {
				return fail(fmt.Errorf("set %s=%s in cgroup %s: %w", w[0], w[1], dir, err))
			}
		}
	}
	return dirs, nil
}

// v1Limits are the files and values of s's limits in controller ctrl.
func v1Limits(ctrl string, s Spec) [][2]string {
	var writes [][2]string
	switch ctrl {
	case "memory":
		if s.MemoryBytes > 0 {
			writes = append(writes, [2]string{"memory.limit_in_bytes", strconv.FormatInt(s.MemoryBytes, 10)})
		}
		if s.MemoryReservationBytes > 0 {
			writes = append(writes, [2]string{"memory.soft_limit_in_bytes", strconv.FormatInt(s.MemoryReservationBytes, 10)})
		}
	case "cpu":
		if s.NanoCPUs > 0 {
			writes = append(writes, [2]string{"cpu.cfs_period_us", strconv.Itoa(cpuPeriodMicros)},
				[2]string{"cpu.cfs_quota_us", strconv.FormatInt(s.NanoCPUs*cpuPeriodMicros/1e9, 10)})
		}
	case "pids":
		if s.PidsLimit > 0 {
			writes = append(writes, [2]string{"pids.max", strconv.FormatInt(s.PidsLimit, 10)})
		}
	}
	return writes
}

// v1Groups are a run's distinct group dirs, sorted.
func v1Groups(dirs map[string]string) []string {
	var out []string
	for _, d := range dirs {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// removeCgroupV1 kills what is left in the run's groups and removes them.
func removeCgroupV1(dirs map[string]string) {
	for _, dir := range v1Groups(dirs) {
		for i := 0; i < 50; i++ {
			for _, pid := range cgroupProcs(dir) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			err := os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) {
				_ = os.RemoveAll(dir) // a test tree of plain files
				break
			}
			time.Sleep(10 * time.Millisecond) // processes are still leaving
		}
	}
}

// cgroupProcs lists the pids in a group's cgroup.procs.
func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out
}

// cgroupV1Usage returns the run's total CPU time and current memory
// (less the page cache it can drop).
func cgroupV1Usage(dirs map[string]string) (time.Duration, int64, error) {
	md, cd := dirs["memory"], dirs["cpuacct"]
	if md == "" || cd == "" {
		return 0, 0, errors.New("no memory or cpuacct group")
	}
	readInt := func(p string) (int64, error) {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	}
	ns, err := readInt(filepath.Join(cd, "cpuacct.usage"))
	if err != nil {
		return 0, 0, err
	}
	mem, err := readInt(filepath.Join(md, "memory.usage_in_bytes"))
	if err != nil {
		return 0, 0, err
	}
	if inactive := readKeyed(filepath.Join(md, "memory.stat"), "total_inactive_file"); inactive < mem {
		mem -= inactive
	}
	return time.Duration(ns), mem, nil
}

// setupCgroupsV1 is setupCgroups' fallback where cgroup v2 cannot be used:
// the v1 controllers, if they are mounted and writable. e.cgReason holds
// why v2 could not be used.
func (e *Exec) setupCgroupsV1() {
	if e.CgroupParent != "" {
		return // a v2 parent was asked for: no v1 fallback
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		e.cgReason += fmt.Sprintf("; no cgroup v1 either (%v)", err)
		return
	}
	self, _ := os.ReadFile("/proc/self/cgroup")
	ctrls, why := setupCgroupsV1(string(mi), string(self))
	if len(ctrls) == 0 {
		e.cgReason += "; no cgroup v1 either: " + why
		return
	}
	e.cgV1 = ctrls
	var names []string
	for _, c := range ctrls {
		names = append(names, c.base+" ("+strings.Join(c.ctrls, ",")+")")
	}
	e.cgReason = "cgroup v1 groups under " + strings.Join(names, ", ")
}
