package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cshare/cshare/internal/tarcopy"
)

var _ Enterer = (*Exec)(nil)

// The exec driver's runs are plain processes on this machine, so entering
// one is starting a process beside it: in the run's work dir, with the
// environment its wrapper started with (read from /proc), as the node's
// user. It is not inside the run's mount namespace (read-only dataset
// binds, exec_ro.go): the work dir's symlinks name the datasets instead.
// Its ports are this machine's (127.0.0.1).

// runEnv is the run's work dir and environment, when it runs.
func (e *Exec) runEnv(id RunID) (string, []string, error) {
	st, err := e.loadState(id)
	if err != nil {
		return "", nil, err
	}
	if !e.status(st).running {
		return "", nil, fmt.Errorf("%w: run %s has ended", ErrNotFound, idShort(id))
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(st.Pid) + "/environ")
	if err != nil {
		return "", nil, fmt.Errorf("runtime: exec: the environment of run %s: %w", idShort(id), err)
	}
	var env []string
	for _, kv := range bytes.Split(b, []byte{0}) {
		if len(kv) > 0 {
			env = append(env, string(kv))
		}
	}
	return st.WorkDir, env, nil
}

// Enter starts p beside run id: its work dir, its environment and p.Env,
// a new session, and a terminal of its own with p.TTY.
func (e *Exec) Enter(ctx context.Context, id RunID, p Process, stdio Stdio) (Proc, error) {
	if len(p.Cmd) == 0 {
		return nil, specErr("cmd", "is required")
	}
	dir, env, err := e.runEnv(id)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(p.Cmd[0], p.Cmd[1:]...)
	cmd.Dir, cmd.Env = dir, append(env, p.Env...)
	pr := &execProc{cmd: cmd, done: make(chan struct{})}
	var closers []io.Closer
	if p.TTY {
		m, s, err := openPTY()
		if err != nil {
			return nil, fmt.Errorf("runtime: exec: a terminal: %w", err)
		}
		pr.pty = m
		if p.Cols > 0 && p.Rows > 0 {
			_ = pr.Resize(p.Cols, p.Rows)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		closers = append(closers, s)
	} else {
		cmd.Stdout, cmd.Stderr = stdio.Stdout, stdio.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		// Wait waits for the output (its pipes end when the process and
		// what it left behind close them, or WaitDelay after it exits),
		// never for the input: a client that sends no EOF does not keep
		// an ended session open.
		cmd.WaitDelay = 2 * time.Second
		if stdio.Stdin != nil {
			w, err := cmd.StdinPipe()
			if err != nil {
				return nil, err
			}
			go func() {
				_, _ = io.Copy(w, stdio.Stdin)
				_ = w.Close()
			}()
		}
	}
	if err := cmd.Start(); err != nil {
		if pr.pty != nil {
			pr.pty.Close()
		}
		for _, c := range closers {
			c.Close()
		}
		return nil, fmt.Errorf("runtime: exec: start %q in run %s: %w", p.Cmd[0], idShort(id), err)
	}
	for _, c := range closers {
		c.Close() // the child holds its own copy of the terminal's end
	}
	var copying sync.WaitGroup
	if p.TTY {
		if stdio.Stdin != nil {
			go func() {
				_, _ = io.Copy(pr.pty, stdio.Stdin)
				_, _ = pr.pty.Write([]byte{4}) // the terminal's EOF, as typed
			}()
		}
		copying.Add(1)
		go func() {
			defer copying.Done()
			_, _ = io.Copy(stdio.Stdout, pr.pty) // ends with EIO once the terminal's last holder is gone
		}()
	}
	go func() {
		err := cmd.Wait()
		copying.Wait()
		pr.code = exitCode(cmd, err)
		close(pr.done)
	}()
	return pr, nil
}

// execProc is a process started beside an exec run.
type execProc struct {
	cmd  *exec.Cmd
	pty  *os.File // the terminal's master side, nil without a TTY
	done chan struct{}
	code int

	closeOnce sync.Once
}

func (p *execProc) Resize(cols, rows uint16) error {
	if p.pty == nil {
		return errors.New("runtime: exec: no terminal to resize")
	}
	return setWinsize(p.pty, cols, rows)
}

func (p *execProc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
		return p.code, nil
	case <-ctx.Done():
		return -1, ctx.Err()
	}
}

// Close hangs up the process's group (its session with a TTY), then kills
// it after grace.
func (p *execProc) Close(grace time.Duration) error {
	p.closeOnce.Do(func() {
		pgid := p.cmd.Process.Pid
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-pgid, syscall.SIGHUP)
			select {
			case <-p.done:
			case <-time.After(grace):
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
			}
		}
		if p.pty != nil {
			p.pty.Close()
		}
	})
	return nil
}

func exitCode(cmd *exec.Cmd, err error) int {
	ps := cmd.ProcessState
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// DialRun connects to port on this machine: an exec run shares its
// network.
func (e *Exec) DialRun(ctx context.Context, id RunID, port int) (net.Conn, error) {
	if _, _, err := e.runEnv(id); err != nil {
		return nil, err
	}
	var dl net.Dialer
	return dl.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

// runPath is p inside run id's work dir: a relative p from there, an
// absolute one as it is (an exec run sees this machine's files).
func (e *Exec) runPath(id RunID, p string) (string, error) {
	dir, _, err := e.runEnv(id)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p), nil
}

// CopyTo unpacks the tar archive r into dir (see runPath), as the node's
// user; entries that would land outside dir are refused (tarcopy.Unpack).
func (e *Exec) CopyTo(ctx context.Context, id RunID, dir string, r io.Reader) error {
	dst, err := e.runPath(id, dir)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(dst); err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s is not a directory of run %s", ErrNotFound, dir, idShort(id))
	}
	return tarcopy.Unpack(ctx, dst, r)
}

// CopyFrom is a tar archive of p (see runPath).
func (e *Exec) CopyFrom(ctx context.Context, id RunID, p string) (io.ReadCloser, PathStat, error) {
	src, err := e.runPath(id, p)
	if err != nil {
		return nil, PathStat{}, err
	}
	st, err := statPath(src)
	if err != nil {
		return nil, PathStat{}, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarcopy.Pack(ctx, pw, src, st.Name)) }()
	return pr, st, nil
}

// Stat describes p (see runPath).
func (e *Exec) Stat(ctx context.Context, id RunID, p string) (PathStat, error) {
	src, err := e.runPath(id, p)
	if err != nil {
		return PathStat{}, err
	}
	return statPath(src)
}

func statPath(p string) (PathStat, error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return PathStat{}, fmt.Errorf("%w: %s", ErrNotFound, p)
	}
	if err != nil {
		return PathStat{}, err
	}
	return PathStat{Name: filepath.Base(p), Size: fi.Size(), Dir: fi.IsDir()}, nil
}
