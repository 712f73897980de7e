package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
//	state.json   labels, argv, working dir, start time, its cgroups
//	pid          the wrapper's pid and its start time, and the run's ID
//	output.log   the command's combined stdout and stderr
//	exit         "<code> <run ID>", once the command has ended
//
// Directories are reused from run to run, their files written over in
// place (exec_pool.go): the pid and exit files name their run, and what
// names another is ignored.
//
// The command is not started directly. It runs under a tiny /bin/sh wrapper
//
//	sh -c 'trap : HUP INT TERM; [join cgroup]; "$@"; printf ... $? $id 1<>exit' ...
//
// in a new session (so it has its own process group and outlives the node),
// and the wrapper writes the command's exit code to the exit file itself,
// with the shell's own printf: a rename (mv) was a second process per run,
// which for short items cost as much as the command. A reader that finds
// no code of its run there (the wrapper between its open and its write)
// takes the run for running while its wrapper lives, and a wrapper killed
// in between leaves the code to the node that reaps it, as if it had
// written nothing.
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
// the wrapper joins it before starting the command. Where the host has only
// cgroup v1 for those controllers (the hybrid layout), each run gets a
// group in each v1 hierarchy instead, under the node's own (exec_cgv1.go).
// Groups are reused from run to run, their limits rewritten
// (exec_cgpool.go).
// Otherwise limits are not enforced and the driver logs one warning, the
// first time a run asks for any. ShmBytes is never enforced. GPUs are passed as CUDA_VISIBLE_DEVICES
// (empty when the run has none). Each mount appears as a symlink at
// WorkDir/<Target> to Source; ReadOnly ones are read-only binds in a mount
// namespace of the run's own when the node is root (see exec_ro.go).
type Exec struct {
	root string
	log  *slog.Logger

	// CgroupParent is the cgroup v2 directory under which each run gets its
	// own group. Default: /sys/fs/cgroup/cshare. Set it before the first Start.
	CgroupParent string

	mu       sync.Mutex
	children map[RunID]*execChild // runs this value started and still reaps
	pool     []string             // hidden run dirs to reuse (exec_pool.go)
	cg       cgPool               // cgroups to reuse (exec_cgpool.go)
	nullOnce sync.Once
	null     *os.File // /dev/null, every run's stdin; nil if it cannot be opened
	poolOnce sync.Once

	cgOnce   sync.Once
	cgBase   string // "" when limits cannot be enforced with cgroup v2
	cgV1     []cgV1 // else the cgroup v1 controllers, if any (exec_cgv1.go)
	cgReason string
	warnOnce sync.Once
}

var _ Driver = (*Exec)(nil)

type execChild struct {
	pid   int
	st    execState     // its state.json, with the pid
	final *execStatus   // once reaped and read (e.mu)
	done  chan struct{} // closed after the wrapper was reaped and its exit recorded
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
	CgroupsV1 map[string]string `json:"cgroups_v1,omitempty"` // the run's group by v1 controller
	OOMBase   int64             `json:"oom_base,omitempty"`   // the groups' OOM-kill count before the run (exec_cgpool.go)
}

const (
	execStateFile = "state.json"
	execLogFile   = "output.log"
	execExitFile  = "exit"

	defaultCgroupParent = "/sys/fs/cgroup/cshare"
	cpuPeriodMicros     = 100000
)

// wrapperScript runs "$@" and records its exit code. $1 is the exit file, $2
// the cgroup.procs files to join, separated by ":" ("" for none).
const wrapperScript = `f=$1; g=$2; shift 2
trap : HUP INT TERM
if [ -n "$g" ]; then
  set -f; ifs=$IFS; IFS=:
  for p in $g; do
    if ! echo $$ > "$p"; then
      echo "cshare: cannot join cgroup $p" >&2
      echo 125 > "$f.tmp" && mv -f "$f.tmp" "$f"
      exit 125
    fi
  done
  IFS=$ifs; set +f
fi
"$@"
c=$?
d=${f%/*}
printf '%-23s\n' "$c ${d##*/}" 1<>"$f"
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
	return &Exec{root: root, log: log, children: make(map[RunID]*execChild),
		cg: cgPool{tag: rootTag(root), taken: map[int]*cgGroup{}}}
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
	return e.cgBase != "" || len(e.cgV1) > 0, e.cgReason
}

func hasLimits(s Spec) bool {
	return s.NanoCPUs > 0 || s.MemoryBytes > 0 || s.MemoryReservationBytes > 0 || s.PidsLimit > 0
}

// Start launches the command under the wrapper and returns once it runs.
func (e *Exec) Start(ctx context.Context, s Spec) (RunID, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	if s.Entrypoint != "" {
		// The program first, then its arguments, as Docker runs them.
		s.Cmd = append([]string{s.Entrypoint}, s.Cmd...)
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
	// Prepared hidden (exec_pool.go), then renamed into place.
	dir, err := e.takeFree(id)
	if err != nil {
		return "", err
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

	cg, cgv1, oomBase, err := e.takeCgroups(id, s)
	if err != nil {
		return "", fmt.Errorf("runtime: exec: %w", err)
	}
	if cg == "" && cgv1 == nil && hasLimits(s) {
		e.warnOnce.Do(func() {
			e.log.Warn("exec driver: resource limits are not enforced", "reason", e.cgReason)
		})
	}
	defer func() {
		if !ok {
			e.putCgroups(execState{Cgroup: cg, CgroupsV1: cgv1}, execStatus{})
		}
	}()

	st := execState{
		ID:        id,
		Labels:    s.Labels(),
		Cmd:       append([]string(nil), s.Cmd...),
		WorkDir:   workDir,
		StartedAt: time.Now().UTC(),
		Cgroup:    cg,
		CgroupsV1: cgv1,
		OOMBase:   oomBase,
	}
	logFile, err := prepareRun(dir, st)
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	if err := os.Rename(dir, e.runDir(id)); err != nil {
		return "", fmt.Errorf("runtime: exec: create run dir: %w", err)
	}
	dir = e.runDir(id)

	procs := ""
	if cg != "" {
		procs = filepath.Join(cg, "cgroup.procs")
	}
	for _, d := range v1Groups(cgv1) {
		if procs != "" {
			procs += ":"
		}
		procs += filepath.Join(d, "cgroup.procs")
	}
	args, attr, err := wrapperArgs(e.exitPath(id), procs, readOnlySources(s), s.Cmd)
	if err != nil {
		return "", err
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.Dir = workDir
	cmd.Env = s.Environ(map[string]string{
		"PATH":                 "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME":                 workDir,
		"CUDA_VISIBLE_DEVICES": strings.Join(s.GPUUUIDs, ","),
	})
	if null := e.devNull(); null != nil {
		cmd.Stdin = null // not one opened per run (exec.Cmd's default)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("runtime: exec: start %q: %w", s.Cmd[0], err)
	}
	ok = true

	pid := cmd.Process.Pid
	st.Pid = pid
	st.PidStart, _ = procStartTime(pid)
	child := &execChild{pid: pid, st: st, done: make(chan struct{})}
	e.mu.Lock()
	e.children[id] = child
	e.mu.Unlock()
	go e.reap(id, cmd, child)

	if err := e.writePid(id, st.Pid, st.PidStart); err != nil {
		// The run is going; without its pid a restarted node must find
		// the wrapper by its exit file (findWrapper): say so, do not kill it.
		e.log.Error("exec driver: cannot record run's pid", "run", string(id), "err", err)
	}
	return id, nil
}

func (e *Exec) devNull() *os.File {
	e.nullOnce.Do(func() { e.null, _ = os.Open(os.DevNull) })
	return e.null
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
// The usual case, the wrapper's code there, is read without the lock
// (which only keeps Remove from moving the directory while the code is
// written): every Start and Wait waited behind that read.
func (e *Exec) recordExit(id RunID, code int) {
	p := e.exitPath(id)
	wrote := func() bool {
		b, err := os.ReadFile(p)
		_, ok := parseExit(b, id)
		return err == nil && ok
	}
	if wrote() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if wrote() {
		return
	}
	if _, err := os.Stat(e.runDir(id)); err != nil {
		return // removed
	}
	if err := writeFileAtomic(p, []byte(fmt.Sprintf("%-23s\n", strconv.Itoa(code)+" "+string(id)))); err != nil {
		e.log.Warn("exec driver: cannot record exit code", "run", string(id), "err", err)
	}
}

func (e *Exec) loadState(id RunID) (execState, error) {
	var st execState
	if !execIDPattern.MatchString(string(id)) {
		return st, notFound(id)
	}
	if c := e.child(id); c != nil {
		return c.st, nil // what Start wrote, and the pid
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
	if st.ID == "" {
		st.ID = id
	}
	if st.ID != id {
		// A reused directory whose new state a power loss undid.
		return st, fmt.Errorf("runtime: exec: state of %s names run %s", id, st.ID)
	}
	if st.Pid == 0 {
		// The pid is in its own file, written after the wrapper started
		// (exec_pool.go; state.json held it before).
		st.Pid, st.PidStart = e.readPid(id)
	}
	if st.Pid == 0 {
		// A node killed between starting the wrapper and recording its
		// pid left a run going without it, which then passed for lost
		// (exit -1: its item failed) while its command ran on. Find the
		// wrapper by the exit file it names, and record its pid.
		if pid, start, ok := findWrapper(e.exitPath(id)); ok {
			st.Pid, st.PidStart = pid, start
			if err := e.writePid(id, pid, start); err != nil {
				e.log.Warn("exec driver: cannot record a found run's pid", "run", string(id), "err", err)
			}
		}
	}
	return st, nil
}

func (e *Exec) child(id RunID) *execChild {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.children[id]
}
