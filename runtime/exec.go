package runtime

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Exec runs plain processes. It is not a sandbox: the command runs as the
// node's user with the node's view of the file system. It is safe for
// concurrent use.
//
// # On-disk layout and adoption
//
// Each run has a directory root/runs/<id>/ holding
//
//	state.json   labels, argv, working dir, wrapper pid and its start time, start time
//	output.log   the command's combined stdout and stderr
//	exit         the exit code, once the command has ended
//
// The command is not started directly. It runs under a tiny /bin/sh wrapper
//
//	sh -c 'trap : HUP INT TERM; [join cgroup]; "$@"; echo $? > exit.tmp; mv exit.tmp exit' ...
//
// in a new session (so it has its own process group and outlives the node),
// and the wrapper writes the command's exit code to the exit file itself.
// The exit code is therefore recorded even when the node that started the
// run was killed with SIGKILL and nobody was left to wait(2) for it. (A
// shell was chosen over re-executing the node binary as the wrapper: it needs
// no hook in main and exists wherever the exec driver makes sense.) A fresh
// Exec over the same root (the node after a restart) adopts the runs: List
// and Wait read state.json and the exit file, and a run without an exit file
// is running while its wrapper process (identified by pid and the start time
// in /proc, so a reused pid does not count) is alive. A run whose wrapper
// vanished without an exit file while no node was watching reports ExitCode
// -1 and an Err saying the status was lost.
//
// Stop with a grace period sends SIGTERM to the command's processes but not
// to the wrapper, which records the command's status (143 if SIGTERM killed
// it); after the grace, or at once with grace 0, SIGKILL goes to the whole
// process group, and the driver records 128+9 itself since the wrapper died
// too. The wrapper also ignores (traps) HUP, INT and TERM from elsewhere, and
// the command gets default signal handling. When a run this driver started
// ends, any processes it left in its group are killed, as Docker does when a
// container's main process exits.
//
// # Limits
//
// Where cgroup v2 is writable (the parent of CgroupParent holds
// cgroup.controllers and the driver can create CgroupParent and a child in
// it), each run gets a child group with memory.max (MemoryBytes), memory.low
// (MemoryReservationBytes), cpu.max (NanoCPUs) and pids.max (PidsLimit), and
// the wrapper joins it before starting the command. Otherwise limits are not
// enforced and the driver logs one warning, the first time a run asks for
// any. ShmBytes is never enforced. GPUs are passed as CUDA_VISIBLE_DEVICES
// (empty when the run has none). Mounts have no namespace to live in: each
// appears as a symlink at WorkDir/<Target> to Source, and ReadOnly is not
// enforced.
type Exec struct {
	root string
	log  *slog.Logger

	// CgroupParent is the cgroup v2 directory under which each run gets its
	// own group. Default: /sys/fs/cgroup/cshare. Set it before the first Start.
	CgroupParent string

	mu       sync.Mutex
	children map[RunID]*execChild // runs this value started and still reaps

	cgOnce   sync.Once
	cgBase   string // "" when limits cannot be enforced
	cgReason string
	warnOnce sync.Once
}

var _ Driver = (*Exec)(nil)

type execChild struct {
	pid  int
	done chan struct{} // closed after the wrapper was reaped and its exit recorded
}

// execState is the persisted part of a run, root/runs/<id>/state.json.
type execState struct {
	ID        RunID             `json:"id"`
	Labels    map[string]string `json:"labels"`
	Cmd       []string          `json:"cmd"`
	WorkDir   string            `json:"workdir"`
	Pid       int               `json:"pid"`       // the wrapper; also the process group ID
	PidStart  uint64            `json:"pid_start"` // /proc/<pid>/stat starttime, 0 if unknown
	StartedAt time.Time         `json:"started_at"`
	Cgroup    string            `json:"cgroup,omitempty"`
}

const (
	execStateFile = "state.json"
	execLogFile   = "output.log"
	execExitFile  = "exit"

	defaultCgroupParent = "/sys/fs/cgroup/cshare"
	cpuPeriodMicros     = 100000
)

// wrapperScript runs "$@" and records its exit code. $1 is the exit file, $2
// the cgroup.procs file to join ("" for none).
const wrapperScript = `f=$1; g=$2; shift 2
trap : HUP INT TERM
if [ -n "$g" ]; then
  if ! echo $$ > "$g"; then
    echo "cshare: cannot join cgroup $g" >&2
    echo 125 > "$f.tmp" && mv -f "$f.tmp" "$f"
    exit 125
  fi
fi
"$@"
c=$?
echo $c > "$f.tmp" && mv -f "$f.tmp" "$f"
exit $c
`

var execIDPattern = regexp.MustCompile(`^[0-9a-f]{16,64}$`)

// NewExec returns an exec driver keeping its state under root. A nil log
// means slog.Default(). It does no IO until the first call.
func NewExec(root string, log *slog.Logger) *Exec {
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	if log == nil {
		log = slog.Default()
	}
	return &Exec{root: root, log: log, children: make(map[RunID]*execChild)}
}

// Name returns "exec".
func (e *Exec) Name() string { return "exec" }

func (e *Exec) runsDir() string           { return filepath.Join(e.root, "runs") }
func (e *Exec) runDir(id RunID) string    { return filepath.Join(e.runsDir(), string(id)) }
func (e *Exec) exitPath(id RunID) string  { return filepath.Join(e.runDir(id), execExitFile) }
func (e *Exec) statePath(id RunID) string { return filepath.Join(e.runDir(id), execStateFile) }

// LimitsEnforced reports whether runs get a cgroup v2 group with their
// limits, and if not, why.
func (e *Exec) LimitsEnforced() (bool, string) {
	e.cgOnce.Do(e.setupCgroups)
	return e.cgBase != "", e.cgReason
}

func hasLimits(s Spec) bool {
	return s.NanoCPUs > 0 || s.MemoryBytes > 0 || s.MemoryReservationBytes > 0 || s.PidsLimit > 0
}

// Start launches the command under the wrapper and returns once it runs.
func (e *Exec) Start(ctx context.Context, s Spec) (RunID, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	if len(s.Cmd) == 0 || s.Cmd[0] == "" {
		return "", specErr("cmd", "is required by the exec driver")
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	id, err := newExecID()
	if err != nil {
		return "", err
	}
	dir := e.runDir(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("runtime: exec: create run dir: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(dir)
		}
	}()

	workDir := s.WorkDir
	if workDir == "" {
		workDir = filepath.Join(e.root, "instances", safeName(s.Instance))
	}
	if abs, err := filepath.Abs(workDir); err == nil {
		workDir = abs
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return "", fmt.Errorf("runtime: exec: create work dir: %w", err)
	}
	for i, m := range s.Mounts {
		if err := linkMount(workDir, m); err != nil {
			return "", fmt.Errorf("runtime: exec: mounts[%d]: %w", i, err)
		}
	}

	cg := ""
	if base, _ := e.cgroupBase(); base != "" {
		cg, err = createRunCgroup(base, id, s)
		if err != nil {
			return "", fmt.Errorf("runtime: exec: %w", err)
		}
	} else if hasLimits(s) {
		e.warnOnce.Do(func() {
			e.log.Warn("exec driver: resource limits are not enforced", "reason", e.cgReason)
		})
	}
	defer func() {
		if !ok && cg != "" {
			_ = os.Remove(cg)
		}
	}()

	logFile, err := os.OpenFile(filepath.Join(dir, execLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("runtime: exec: create log: %w", err)
	}
	defer logFile.Close()

	st := execState{
		ID:        id,
		Labels:    s.Labels(),
		Cmd:       append([]string(nil), s.Cmd...),
		WorkDir:   workDir,
		StartedAt: time.Now().UTC(),
		Cgroup:    cg,
	}
	if err := writeJSONAtomic(e.statePath(id), st); err != nil {
		return "", err
	}

	procs := ""
	if cg != "" {
		procs = filepath.Join(cg, "cgroup.procs")
	}
	args := append([]string{"-c", wrapperScript, "cshare-run", e.exitPath(id), procs}, s.Cmd...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir = workDir
	cmd.Env = s.Environ(map[string]string{
		"PATH":                 "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":                 workDir,
		"CUDA_VISIBLE_DEVICES": strings.Join(s.GPUUUIDs, ","),
	})
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("runtime: exec: start %q: %w", s.Cmd[0], err)
	}
	ok = true

	pid := cmd.Process.Pid
	st.Pid = pid
	st.PidStart, _ = procStartTime(pid)
	child := &execChild{pid: pid, done: make(chan struct{})}
	e.mu.Lock()
	e.children[id] = child
	e.mu.Unlock()
	go e.reap(id, cmd, child)

	if err := writeJSONAtomic(e.statePath(id), st); err != nil {
		// The run is going; without its pid a restarted node cannot tell
		// whether it still runs, so say so loudly but do not kill it.
		e.log.Error("exec driver: cannot record run state", "run", string(id), "err", err)
	}
	return id, nil
}

// reap waits for the wrapper, records its exit if the wrapper could not,
// and kills what the run left in its process group.
func (e *Exec) reap(id RunID, cmd *exec.Cmd, child *execChild) {
	err := cmd.Wait()
	code := -1
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		} else {
			code = ps.ExitCode()
		}
	} else if err != nil {
		e.log.Warn("exec driver: wait failed", "run", string(id), "err", err)
	}
	// The pid cannot have been reused yet: the group still exists while any
	// member does, and the leader was reaped only just now.
	_ = syscall.Kill(-child.pid, syscall.SIGKILL)
	e.recordExit(id, code)
	close(child.done)
}

// recordExit writes the exit file unless the wrapper already did.
func (e *Exec) recordExit(id RunID, code int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.exitPath(id)
	if _, err := os.Stat(p); err == nil {
		return
	}
	if _, err := os.Stat(e.runDir(id)); err != nil {
		return // removed
	}
	if err := writeFileAtomic(p, []byte(strconv.Itoa(code)+"\n")); err != nil {
		e.log.Warn("exec driver: cannot record exit code", "run", string(id), "err", err)
	}
}

func (e *Exec) loadState(id RunID) (execState, error) {
	var st execState
	if !execIDPattern.MatchString(string(id)) {
		return st, notFound(id)
	}
	b, err := os.ReadFile(e.statePath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return st, notFound(id)
	}
	if err != nil {
		return st, fmt.Errorf("runtime: exec: read state of %s: %w", id, err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("runtime: exec: corrupt state of %s: %w", id, err)
	}
	st.ID = id
	return st, nil
}

func (e *Exec) child(id RunID) *execChild {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.children[id]
}

// execStatus is what the disk and the process table say about a run.
type execStatus struct {
	running  bool
	exit     ExitStatus
	finished time.Time
}

func (e *Exec) status(st execState) execStatus {
	if es, fin, ok := e.readExit(st); ok {
		return execStatus{exit: es, finished: fin}
	}
	if c := e.child(st.ID); c != nil {
		select {
		case <-c.done:
		default:
			return execStatus{running: true}
		}
	} else if st.Pid > 0 && pidAlive(st.Pid, st.PidStart) {
		return execStatus{running: true}
	}
	// The wrapper is gone; it may have written the exit file just now.
	if es, fin, ok := e.readExit(st); ok {
		return execStatus{exit: es, finished: fin}
	}
	return execStatus{exit: ExitStatus{Code: -1, Err: "exit status lost: the process ended without recording it while no node was watching"}}
}

func (e *Exec) readExit(st execState) (ExitStatus, time.Time, bool) {
	p := e.exitPath(st.ID)
	b, err := os.ReadFile(p)
	if err != nil {
		return ExitStatus{}, time.Time{}, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return ExitStatus{}, time.Time{}, false
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
	es := ExitStatus{Code: code}
	if st.Cgroup != "" {
		es.OOMKilled = cgroupOOMKilled(st.Cgroup)
	}
	return es, fin, true
}

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
	if e.status(st).running {
		return stillRunning(id)
	}
	e.mu.Lock()
	delete(e.children, id)
	err = os.RemoveAll(e.runDir(id))
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("runtime: exec: remove run %s: %w", id, err)
	}
	if st.Cgroup != "" {
		removeCgroup(st.Cgroup)
	}
	return nil
}

func newExecID() (RunID, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("runtime: exec: run id: %w", err)
	}
	return RunID(hex.EncodeToString(b[:])), nil
}

// safeName turns an instance ID into a directory name. Names that had to be
// changed get a hash suffix so that distinct IDs stay distinct.
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == s && out != "." && out != ".." && len(out) <= 128 {
		return out
	}
	sum := sha256.Sum256([]byte(s))
	return truncate(strings.Trim(out, "."), 64) + "-" + hex.EncodeToString(sum[:4])
}

// linkMount makes m.Source visible at workDir/m.Target as a symlink.
func linkMount(workDir string, m Mount) error {
	dst := filepath.Join(workDir, filepath.Clean("/"+m.Target))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if cur, err := os.Readlink(dst); err == nil {
		if cur == m.Source {
			return nil
		}
		if err := os.Remove(dst); err != nil {
			return err
		}
	} else if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s exists and is not a symlink", dst)
	}
	return os.Symlink(m.Source, dst)
}

func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("runtime: exec: encode %s: %w", filepath.Base(path), err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// writeFileAtomic writes via a synced temporary file and a rename, so a
// reader (or a node after a crash) sees the old or the new content, never
// a torn one.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp-go"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("runtime: exec: write %s: %w", filepath.Base(path), err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("runtime: exec: write %s: %w", filepath.Base(path), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("runtime: exec: sync %s: %w", filepath.Base(path), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("runtime: exec: write %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("runtime: exec: write %s: %w", filepath.Base(path), err)
	}
	return nil
}
