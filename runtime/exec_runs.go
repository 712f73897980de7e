package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Wait blocks until the run has exited. Runs started by another Exec value
// (before a restart) are polled.
func (e *Exec) Wait(ctx context.Context, id RunID) (ExitStatus, error) {
	st, err := e.loadState(id)
	if err != nil {
		return ExitStatus{}, err
	}
	if c := e.child(id); c != nil {
		select {
		case <-c.done:
		case <-ctx.Done():
			return ExitStatus{}, ctx.Err()
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		s := e.status(st)
		if !s.running {
			return s.exit, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ExitStatus{}, ctx.Err()
		}
		if _, err := os.Stat(e.statePath(id)); err != nil {
			return ExitStatus{}, notFound(id)
		}
	}
}

// Stop signals the run's process group: SIGKILL at once with grace 0,
// otherwise SIGTERM and SIGKILL once grace has passed. It returns when the
// group is gone.
func (e *Exec) Stop(ctx context.Context, id RunID, grace time.Duration) error {
	st, err := e.loadState(id)
	if err != nil {
		return err
	}
	if !e.status(st).running || st.Pid <= 0 {
		return nil
	}
	pgid := st.Pid
	sig := syscall.SIGKILL
	if grace > 0 {
		// SIGTERM goes to the command and its processes but not to the
		// wrapper, which must live to record the command's exit status.
		sig = syscall.SIGTERM
		wrapper := procCmdline(pgid)
		deadline := time.Now().Add(grace)
		termed := false
		for {
			if !termed {
				termed = termCommand(pgid, wrapper)
			}
			if !groupAlive(pgid) || !time.Now().Before(deadline) {
				break
			}
			if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
				return err
			}
		}
		if groupAlive(pgid) {
			sig = syscall.SIGKILL
		}
	}
	if sig == syscall.SIGKILL {
		if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("runtime: exec: kill run %s: %w", id, err)
		}
	}
	for groupAlive(pgid) {
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	if c := e.child(id); c != nil {
		// Our own child: reap records the exit; wait for it so that Stop
		// returning means Wait and List see the run as exited.
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		// An adopted run whose wrapper was killed could not record its exit.
		e.recordExit(id, 128+int(sig))
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Logs returns the last LogCap bytes of the run's output.
func (e *Exec) Logs(ctx context.Context, id RunID) ([]byte, error) {
	if _, err := e.loadState(id); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(e.runDir(id), execLogFile))
	if errors.Is(err, fs.ErrNotExist) {
		return []byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: exec: open log of %s: %w", id, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > LogCap {
		if _, err := f.Seek(fi.Size()-LogCap, io.SeekStart); err != nil {
			return nil, fmt.Errorf("runtime: exec: read log of %s: %w", id, err)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, LogCap))
	if err != nil {
		return nil, fmt.Errorf("runtime: exec: read log of %s: %w", id, err)
	}
	return b, nil
}

// List returns the runs under root that carry all labels, oldest first.
func (e *Exec) List(ctx context.Context, labels map[string]string) ([]RunInfo, error) {
	entries, err := os.ReadDir(e.runsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: exec: list runs: %w", err)
	}
	var out []RunInfo
	for _, ent := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		id := RunID(ent.Name())
		if !ent.IsDir() || !execIDPattern.MatchString(string(id)) {
			continue
		}
		st, err := e.loadState(id)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile, or a Start that died before writing state
		}
		if err != nil {
			e.log.Warn("exec driver: skipping unreadable run", "run", string(id), "err", err)
			continue
		}
		if !matchLabels(st.Labels, labels) {
			continue
		}
		s := e.status(st)
		ri := RunInfo{
			ID:         id,
			Labels:     copyLabels(st.Labels),
			Running:    s.running,
			StartedAt:  st.StartedAt,
			FinishedAt: s.finished,
		}
		if !s.running {
			ri.ExitCode = s.exit.Code
		}
		out = append(out, ri)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Stats samples the run's CPU use over a quarter second and its resident
// memory: from its cgroup when it has one, else from /proc for the
// processes of its group. An exited run reports zeros.
func (e *Exec) Stats(ctx context.Context, id RunID) (Stats, error) {
	st, err := e.loadState(id)
	if err != nil {
		return Stats{}, err
	}
	if !e.status(st).running {
		return Stats{}, nil
	}
	const window = 250 * time.Millisecond
	sample := func() (cpu time.Duration, mem int64) {
		if st.Cgroup != "" {
			if c, m, err := cgroupUsage(st.Cgroup); err == nil {
				return c, m
			}
		}
		if len(st.CgroupsV1) > 0 {
			if c, m, err := cgroupV1Usage(st.CgroupsV1); err == nil {
				return c, m
			}
		}
		return groupUsage(st.Pid)
	}
	c0, _ := sample()
	t0 := time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return Stats{}, err
	}
	c1, mem := sample()
	el := time.Since(t0)
	out := Stats{MemoryBytes: mem}
	if d := c1 - c0; d > 0 && el > 0 {
		out.CPUPercent = float64(d) / float64(el) * 100
	}
	return out, nil
}

// Remove deletes an exited run's directory and cgroup. The instance's work
// directory is kept: it belongs to the instance, not to one run.
func (e *Exec) Remove(ctx context.Context, id RunID) error {
	st, err := e.loadState(id)
	if err != nil {
		return err
	}
	es := e.status(st)
	if es.running {
		return stillRunning(id)
	}
	// Renamed out of the runs under the lock (recordExit writes into a run's
	// directory if it is there), emptied or deleted after it: deleting under
	// the lock held up every other run's Wait and Start. A run this value
	// started and reaped (its process group killed) leaves its directory to
	// the pool (exec_pool.go); others may have processes left writing to
	// its output, and are deleted.
	gone := filepath.Join(e.runsDir(), freePrefix+string(id))
	e.mu.Lock()
	c := e.children[id]
	delete(e.children, id)
	err = os.Rename(e.runDir(id), gone)
	e.mu.Unlock()
	reaped := false
	if c != nil {
		select {
		case <-c.done:
			reaped = true
		default:
		}
	}
	if err == nil {
		if reaped {
			e.giveFree(gone)
		} else {
			err = os.RemoveAll(gone)
		}
	} else if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("runtime: exec: remove run %s: %w", id, err)
	}
	e.putCgroups(st, es)
	return nil
}

// execStatus is what the disk and the process table say about a run.
type execStatus struct {
	running  bool
	exit     ExitStatus
	finished time.Time
	oom      int64 // the run's groups' OOM-kill count when read
	oomRead  bool
}

func (e *Exec) status(st execState) execStatus {
	c := e.child(st.ID)
	if c != nil {
		e.mu.Lock()
		final := c.final
		e.mu.Unlock()
		if final != nil {
			return *final
		}
	}
	if s, ok := e.readExit(st); ok {
		if c != nil && isClosed(c.done) {
			// Reaped, its exit recorded: nothing changes any more.
			e.mu.Lock()
			c.final = &s
			e.mu.Unlock()
		}
		return s
	}
	if c != nil {
		if !isClosed(c.done) {
			return execStatus{running: true}
		}
	} else if st.Pid > 0 && pidAlive(st.Pid, st.PidStart) {
		return execStatus{running: true}
	}
	// The wrapper is gone; it may have written the exit file just now.
	if s, ok := e.readExit(st); ok {
		return s
	}
	return execStatus{exit: ExitStatus{Code: -1, Err: "exit status lost: the process ended without recording it while no node was watching"}}
}

// parseExit reads an exit file's "<code> <run ID>" ("<code>" before run
// directories were reused), padded to 24 bytes so that it covers what a
// run before wrote there (the wrapper writes over it, not truncating it,
// see prepareRun). A code written for another run (a reused directory's
// last run) is no code.
func parseExit(b []byte, id RunID) (int, bool) {
	f := strings.Fields(string(b))
	if len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != string(id)) {
		return 0, false
	}
	code, err := strconv.Atoi(f[0])
	return code, err == nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// readExit reads the exit file; ok is false while it holds no code.
func (e *Exec) readExit(st execState) (execStatus, bool) {
	p := e.exitPath(st.ID)
	b, err := os.ReadFile(p)
	if err != nil {
		return execStatus{}, false
	}
	code, ok := parseExit(b, st.ID)
	if !ok {
		return execStatus{}, false
	}
	var fin time.Time
	if fi, err := os.Stat(p); err == nil {
		fin = fi.ModTime().UTC()
	}
	if fin.Before(st.StartedAt) {
		// File times come from the kernel's coarse clock (a tick, up to
		// 10 ms, behind time.Now): a run that ends at once seems to end
		// before it began.
		fin = st.StartedAt
	}
	oom := (&cgGroup{v2: st.Cgroup, v1: st.CgroupsV1}).oomCount()
	return execStatus{exit: ExitStatus{Code: code, OOMKilled: oom > st.OOMBase}, finished: fin, oom: oom, oomRead: true}, true
}
