package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Cgroups are reused too. Making a run's group in each v1 hierarchy (four
// on a hybrid host) and removing them after it cost a short item about a
// third of the node's own CPU. A run's groups are now taken from a pool of
// at most maxFreeRuns sets named pool-<tag>-<k> (tag: this driver's root,
// so that drivers sharing the node's cgroup, several nodes of a test,
// never take each other's), and go back to it when the run is removed if
// no process is left in them; otherwise, and beyond the pool, a run's
// groups are made and removed as before. A reused group gets the run's
// limits written where they differ from what its last run had (unset
// limits are written back to unlimited), so limits hold exactly as in a
// fresh group. The kernel's OOM-kill count of a group only grows: a run
// records the count its group had when it began (oom_base in state.json)
// and was OOM-killed if the count is higher when it ends.

// cgGroup is one pooled set of groups.
type cgGroup struct {
	k      int
	v2     string            // the cgroup v2 group, or
	v1     map[string]string // the v1 groups by controller
	limits map[string]string // limit file -> value last written; nil: not known
	oom    int64             // the OOM-kill count when its last run ended
}

// cgPool is the driver's pool: groups ready for a run, and which indices
// are taken by runs (live, or waiting for removal).
type cgPool struct {
	tag   string
	ready []*cgGroup
	taken map[int]*cgGroup
}

func (e *Exec) poolName(k int) string { return "pool-" + e.cg.tag + "-" + strconv.Itoa(k) }

// poolIndex is k for a group named poolName(k), else -1.
func (e *Exec) poolIndex(dir string) int {
	rest, ok := strings.CutPrefix(filepath.Base(dir), "pool-"+e.cg.tag+"-")
	if !ok {
		return -1
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 0 || k >= maxFreeRuns {
		return -1
	}
	return k
}

func rootTag(root string) string {
	sum := sha256.Sum256([]byte(root))
	return hex.EncodeToString(sum[:4])
}

// markTaken records that a run found on disk (loadPool) uses its pooled
// group, which thus is not free until that run is removed.
func (e *Exec) markTaken(st execState) {
	dir := st.Cgroup
	if dir == "" {
		dir = st.CgroupsV1["memory"]
	}
	if k := e.poolIndex(dir); k >= 0 {
		e.cg.taken[k] = &cgGroup{k: k, v2: st.Cgroup, v1: st.CgroupsV1}
	}
}

// takeCgroups returns groups for a run with spec s, their limits written:
// cgroup v2 (v2 != "") or v1 (v1 != nil) or none where limits cannot be
// enforced; base is the groups' OOM-kill count before the run.
func (e *Exec) takeCgroups(id RunID, s Spec) (v2 string, v1 map[string]string, base int64, err error) {
	b2, _ := e.cgroupBase()
	if b2 == "" && len(e.cgV1) == 0 {
		return "", nil, 0, nil
	}
	e.mu.Lock()
	var g *cgGroup
	if n := len(e.cg.ready); n > 0 {
		g, e.cg.ready = e.cg.ready[n-1], e.cg.ready[:n-1]
	} else {
		for k := 0; k < maxFreeRuns && g == nil; k++ {
			if e.cg.taken[k] == nil {
				g = &cgGroup{k: k}
			}
		}
	}
	if g != nil {
		e.cg.taken[g.k] = g
	}
	e.mu.Unlock()
	if g == nil {
		// More runs than the pool: groups of the run's own.
		if b2 != "" {
			v2, err = createRunCgroup(b2, id, s)
		} else {
			v1, err = createRunCgroupV1(e.cgV1, id, s)
		}
		return v2, v1, 0, err
	}
	if g.v2 == "" && g.v1 == nil {
		if err := e.makePooled(g, b2); err != nil {
			e.dropTaken(g.k)
			return "", nil, 0, err
		}
	}
	if err := g.apply(s); err != nil {
		// A group that refuses a limit (memory in use above the new cap)
		// is given up; the run gets a fresh one.
		e.discard(g)
		if g = (&cgGroup{k: g.k}); e.makePooled(g, b2) == nil {
			e.mu.Lock()
			e.cg.taken[g.k] = g
			e.mu.Unlock()
			err = g.apply(s)
		}
		if err != nil {
			e.discard(g)
			return "", nil, 0, err
		}
	}
	return g.v2, g.v1, g.oom, nil
}

// makePooled makes (or finds, left by a process before) g's groups.
func (e *Exec) makePooled(g *cgGroup, b2 string) error {
	name := e.poolName(g.k)
	mk := func(dir string) error {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		return nil
	}
	g.limits = nil // a group found may hold any limits
	if b2 != "" {
		g.v2 = filepath.Join(b2, name)
		return mk(g.v2)
	}
	g.v1 = map[string]string{}
	for _, h := range e.cgV1 {
		dir := filepath.Join(h.base, name)
		if err := mk(dir); err != nil {
			return err
		}
		for _, c := range h.ctrls {
			g.v1[c] = dir
		}
	}
	g.oom = g.oomCount()
	return nil
}

// apply writes the limits of s that differ from those g has.
func (g *cgGroup) apply(s Spec) error {
	var want [][2]string
	if g.v2 != "" {
		want = v2LimitsAll(g.v2, s)
	} else {
		for _, dir := range v1Groups(g.v1) {
			for c, d := range g.v1 {
				if d == dir {
					want = append(want, v1LimitsAll(dir, c, s)...)
				}
			}
		}
	}
	if g.limits == nil {
		g.limits = map[string]string{}
	}
	for _, w := range want {
		if v, ok := g.limits[w[0]]; ok && v == w[1] {
			continue
		}
		delete(g.limits, w[0])
		if err := writeCgroupFile(w[0], w[1]); err != nil {
			return fmt.Errorf("set %s=%s: %w", filepath.Base(w[0]), w[1], err)
		}
		g.limits[w[0]] = w[1]
	}
	return nil
}

// v2LimitsAll are the files and values of every v2 limit for s, unset ones
// unlimited.
func v2LimitsAll(dir string, s Spec) [][2]string {
	mem, low, cpu, pids := "max", "0", "max "+strconv.Itoa(cpuPeriodMicros), "max"
	if s.MemoryBytes > 0 {
		mem = strconv.FormatInt(s.MemoryBytes, 10)
	}
	if s.MemoryReservationBytes > 0 {
		low = strconv.FormatInt(s.MemoryReservationBytes, 10)
	}
	if s.NanoCPUs > 0 {
		cpu = strconv.FormatInt(s.NanoCPUs*cpuPeriodMicros/1e9, 10) + " " + strconv.Itoa(cpuPeriodMicros)
	}
	if s.PidsLimit > 0 {
		pids = strconv.FormatInt(s.PidsLimit, 10)
	}
	j := func(f string) string { return filepath.Join(dir, f) }
	return [][2]string{{j("memory.max"), mem}, {j("memory.low"), low}, {j("cpu.max"), cpu}, {j("pids.max"), pids}}
}

// v1LimitsAll is v2LimitsAll for controller ctrl's v1 group dir.
func v1LimitsAll(dir, ctrl string, s Spec) [][2]string {
	set := map[string]string{}
	for _, w := range v1Limits(ctrl, s) {
		set[w[0]] = w[1]
	}
	var files [][2]string
	switch ctrl {
	case "memory":
		files = [][2]string{{"memory.limit_in_bytes", "-1"}, {"memory.soft_limit_in_bytes", "-1"}}
	case "cpu":
		files = [][2]string{{"cpu.cfs_period_us", strconv.Itoa(cpuPeriodMicros)}, {"cpu.cfs_quota_us", "-1"}}
	case "pids":
		files = [][2]string{{"pids.max", "max"}}
	}
	for i, f := range files {
		if v, ok := set[f[0]]; ok {
			files[i][1] = v
		}
		files[i][0] = filepath.Join(dir, f[0])
	}
	return files
}

// oomCount is the groups' OOM-kill count so far.
func (g *cgGroup) oomCount() int64 {
	if g.v2 != "" {
		return readKeyed(filepath.Join(g.v2, "memory.events"), "oom_kill")
	}
	if d := g.v1["memory"]; d != "" {
		return readKeyed(filepath.Join(d, "memory.oom_control"), "oom_kill")
	}
	return 0
}

// putCgroups takes a removed run's groups back into the pool when they are
// pooled ones and empty, else kills what is left in them and removes them.
// es is the run's status, with the groups' OOM-kill count when it was read.
func (e *Exec) putCgroups(st execState, es execStatus) {
	dir := st.Cgroup
	if dir == "" {
		dir = st.CgroupsV1["memory"]
	}
	k := e.poolIndex(dir)
	e.mu.Lock()
	g := e.cg.taken[k]
	e.mu.Unlock()
	if k < 0 || g == nil || len(cgroupProcs(dir)) > 0 {
		if st.Cgroup != "" {
			removeCgroup(st.Cgroup)
		}
		removeCgroupV1(st.CgroupsV1)
		if k >= 0 {
			e.dropTaken(k)
		}
		return
	}
	if g.oom = es.oom; !es.oomRead {
		g.oom = g.oomCount()
	}
	e.mu.Lock()
	delete(e.cg.taken, k)
	e.cg.ready = append(e.cg.ready, g)
	e.mu.Unlock()
}

// discard removes g's groups and frees its index.
func (e *Exec) discard(g *cgGroup) {
	if g.v2 != "" {
		removeCgroup(g.v2)
	}
	removeCgroupV1(g.v1)
	e.dropTaken(g.k)
}

func (e *Exec) dropTaken(k int) {
	e.mu.Lock()
	delete(e.cg.taken, k)
	e.mu.Unlock()
}

// Release removes the groups kept for reuse (the node calls it when it
// stops); those of runs still going stay theirs.
func (e *Exec) Release() {
	e.mu.Lock()
	ready := e.cg.ready
	e.cg.ready = nil
	e.mu.Unlock()
	for _, g := range ready {
		if g.v2 != "" {
			removeCgroup(g.v2)
		}
		removeCgroupV1(g.v1)
	}
}
