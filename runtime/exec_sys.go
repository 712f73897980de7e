package runtime

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file holds the exec driver's contact with the kernel: cgroup v2
// files and /proc.

// setupCgroups decides once whether runs can get cgroup v2 groups.
func (e *Exec) setupCgroups() {
	base := e.CgroupParent
	if base == "" {
		base = defaultCgroupParent
	}
	fail := func(format string, args ...any) {
		e.cgBase = ""
		e.cgReason = fmt.Sprintf(format, args...)
	}
	parent := filepath.Dir(base)
	ctrl, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if err != nil {
		fail("no cgroup v2 hierarchy at %s (%v)", parent, err)
		e.setupCgroupsV1()
		return
	}
	if !hasWords(string(ctrl), "cpu", "memory") {
		fail("cgroup v2 at %s lacks the cpu or memory controller (has %q)", parent, strings.TrimSpace(string(ctrl)))
		e.setupCgroupsV1()
		return
	}
	// Let base's children use cpu and memory (and pids where present). The
	// parent may already delegate them; an error here is judged below.
	_ = writeCgroupFile(filepath.Join(parent, "cgroup.subtree_control"), "+cpu +memory")
	_ = writeCgroupFile(filepath.Join(parent, "cgroup.subtree_control"), "+pids")
	if err := os.Mkdir(base, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		fail("cannot create cgroup %s: %v", base, err)
		return
	}
	_ = writeCgroupFile(filepath.Join(base, "cgroup.subtree_control"), "+cpu +memory")
	_ = writeCgroupFile(filepath.Join(base, "cgroup.subtree_control"), "+pids")
	sub, err := os.ReadFile(filepath.Join(base, "cgroup.subtree_control"))
	if err != nil || !hasWords(string(sub), "cpu", "memory") {
		fail("cannot delegate the cpu and memory controllers to the children of %s", base)
		return
	}
	probe := filepath.Join(base, "probe-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		fail("cannot create a child cgroup in %s: %v", base, err)
		return
	}
	_ = os.Remove(probe)
	e.cgBase = base
	e.cgReason = "cgroup v2 groups under " + base
}

func (e *Exec) cgroupBase() (string, string) {
	e.cgOnce.Do(e.setupCgroups)
	return e.cgBase, e.cgReason
}

func hasWords(s string, want ...string) bool {
	have := map[string]bool{}
	for _, w := range strings.Fields(s) {
		have[w] = true
	}
	for _, w := range want {
		if !have[w] {
			return false
		}
	}
	return true
}

// writeCgroupFile writes one value. Files in cgroupfs already exist; O_CREATE
// only matters for a test tree made of plain files.
func writeCgroupFile(path, value string) error {
	return writeInPlace(path, []byte(value), 0o644)
}

// createRunCgroup makes base/<id> and writes the spec's limits into it.
func createRunCgroup(base string, id RunID, s Spec) (string, error) {
	dir := filepath.Join(base, string(id))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	var writes [][2]string
	if s.MemoryBytes > 0 {
		writes = append(writes, [2]string{"memory.max", strconv.FormatInt(s.MemoryBytes, 10)})
	}
	if s.MemoryReservationBytes > 0 {
		writes = append(writes, [2]string{"memory.low", strconv.FormatInt(s.MemoryReservationBytes, 10)})
	}
	if s.NanoCPUs > 0 {
		quota := s.NanoCPUs * cpuPeriodMicros / 1e9
		writes = append(writes, [2]string{"cpu.max", fmt.Sprintf("%d %d", quota, cpuPeriodMicros)})
	}
	if s.PidsLimit > 0 {
		writes = append(writes, [2]string{"pids.max", strconv.FormatInt(s.PidsLimit, 10)})
	}
	for _, w := range writes {
		if err := writeCgroupFile(filepath.Join(dir, w[0]), w[1]); err != nil {
			_ = os.Remove(dir)
			return "", fmt.Errorf("set %s=%s in cgroup %s: %w", w[0], w[1], dir, err)
		}
	}
	return dir, nil
}

// removeCgroup kills what is left in the group and removes it.
func removeCgroup(dir string) {
	_ = writeCgroupFile(filepath.Join(dir, "cgroup.kill"), "1")
	for i := 0; i < 50; i++ {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		if !errors.Is(err, syscall.EBUSY) {
			// A test tree of plain files: remove it wholesale.
			_ = os.RemoveAll(dir)
			return
		}
		time.Sleep(10 * time.Millisecond) // processes are still leaving after cgroup.kill
	}
}

// cgroupUsage returns the group's total CPU time and current memory.
func cgroupUsage(dir string) (time.Duration, int64, error) {
	if _, err := os.Stat(filepath.Join(dir, "cpu.stat")); err != nil {
		return 0, 0, err
	}
	cpu := time.Duration(readKeyed(filepath.Join(dir, "cpu.stat"), "usage_usec")) * time.Microsecond
	b, err := os.ReadFile(filepath.Join(dir, "memory.current"))
	if err != nil {
		return 0, 0, err
	}
	mem, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, 0, err
	}
	if inactive := readKeyed(filepath.Join(dir, "memory.stat"), "inactive_file"); inactive < mem {
		mem -= inactive
	}
	return cpu, mem, nil
}

// readKeyed reads "key value" lines and returns key's value, 0 if absent.
func readKeyed(path, key string) int64 {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// procStat holds the fields of /proc/<pid>/stat the driver needs.
type procStat struct {
	state      byte
	pgrp       int
	utime      uint64 // clock ticks
	stime      uint64
	starttime  uint64 // clock ticks after boot
	rssPages   int64
	haveFields bool
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// parseProcStat parses /proc/<pid>/stat. The command name (field 2) is in
// parentheses and may itself contain spaces and parentheses.
func parseProcStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); field n is f[n-3].
	if len(f) < 22 {
		return procStat{}, errors.New("short /proc stat")
	}
	var ps procStat
	ps.state = f[0][0]
	ps.pgrp, _ = strconv.Atoi(f[5-3])
	ps.utime, _ = strconv.ParseUint(f[14-3], 10, 64)
	ps.stime, _ = strconv.ParseUint(f[15-3], 10, 64)
	ps.starttime, _ = strconv.ParseUint(f[22-3], 10, 64)
	ps.rssPages, _ = strconv.ParseInt(f[24-3], 10, 64)
	ps.haveFields = true
	return ps, nil
}

func procStartTime(pid int) (uint64, error) {
	ps, err := readProcStat(pid)
	if err != nil {
		return 0, err
	}
	return ps.starttime, nil
}

func procAvailable() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

// pidAlive reports whether pid is a live (not zombie) process that started
// at start (start 0: unknown, any process with that pid counts).
func pidAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	if !procAvailable() {
		err := syscall.Kill(pid, 0)
		return err == nil || errors.Is(err, syscall.EPERM)
	}
	ps, err := readProcStat(pid)
	if err != nil {
		return false
	}
	if ps.state == 'Z' || ps.state == 'X' || ps.state == 'x' {
		return false
	}
	return start == 0 || ps.starttime == start
}

// groupMembers returns the live (not zombie) processes of group pgid. ok is
// false when /proc cannot be read.
func groupMembers(pgid int) (pids []int, ok bool) {
	if !procAvailable() {
		return nil, false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		ps, err := readProcStat(pid)
		if err == nil && ps.pgrp == pgid && ps.state != 'Z' && ps.state != 'X' && ps.state != 'x' {
			pids = append(pids, pid)
		}
	}
	return pids, true
}

// groupAlive reports whether process group pgid has a live member. Zombies
// do not count: after a node restart its runs' processes belong to init (or
// whatever reaper the machine has), which may be slow to reap them.
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	pids, ok := groupMembers(pgid)
	return !ok || len(pids) > 0
}

// findWrapper finds the live wrapper of a run by its exit file: the leader
// of its own process group (Start makes it a session leader) running
// /bin/sh with exitPath among its arguments (the command it starts execs
// away from that command line; a child forked but not yet exec'd is no
// group leader).
func findWrapper(exitPath string) (pid int, start uint64, ok bool) {
	if !procAvailable() {
		return 0, 0, false
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, false
	}
	for _, ent := range ents {
		p, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		ps, err := readProcStat(p)
		if err != nil || ps.pgrp != p || ps.state == 'Z' || ps.state == 'X' || ps.state == 'x' {
			continue
		}
		args := bytes.Split(bytes.TrimSuffix(procCmdline(p), []byte{0}), []byte{0})
		if len(args) < 2 || string(args[0]) != "/bin/sh" {
			continue
		}
		for _, a := range args[1:] {
			if string(a) == exitPath {
				return p, ps.starttime, true
			}
		}
	}
	return 0, 0, false
}

func procCmdline(pid int) []byte {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return b
}

// termCommand sends SIGTERM to the processes of run group pgid except the
// wrapper (the group leader), and reports whether any got it. A process whose
// command line is still the wrapper's has been forked but has not yet exec'd
// the command; a signal now would be taken by the wrapper's inherited trap
// and lost, so it is skipped and the caller tries again. Without /proc the
// whole group is signalled.
func termCommand(pgid int, wrapperCmdline []byte) bool {
	pids, ok := groupMembers(pgid)
	if !ok {
		err := syscall.Kill(-pgid, syscall.SIGTERM)
		return err == nil || errors.Is(err, syscall.ESRCH)
	}
	sent := false
	for _, pid := range pids {
		if pid == pgid {
			continue
		}
		if len(wrapperCmdline) > 0 && bytes.Equal(procCmdline(pid), wrapperCmdline) {
			continue
		}
		if syscall.Kill(pid, syscall.SIGTERM) == nil {
			sent = true
		}
	}
	return sent
}

// clockTicks is USER_HZ, which is 100 on every Linux architecture Go runs on.
const clockTicks = 100

// groupUsage sums CPU time and resident memory over the processes of group
// pgid, read from /proc.
func groupUsage(pgid int) (time.Duration, int64) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0
	}
	page := int64(os.Getpagesize())
	var ticks uint64
	var rss int64
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		ps, err := readProcStat(pid)
		if err != nil || ps.pgrp != pgid {
			continue
		}
		ticks += ps.utime + ps.stime
		rss += ps.rssPages * page
	}
	return time.Duration(ticks) * time.Second / clockTicks, rss
}
