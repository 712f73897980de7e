package runtime

import (
	"context"
	"io"
	"net"
	"time"
)

// Entering a running run (issue 31): the node's SSH gateway opens a
// process inside a run (a job's container, a contract's instance), sized
// to a terminal or not, and reaches the run's ports; `contract cp` copies
// files in and out as tar archives. Drivers that can do so implement
// Enterer (docker: Docker's exec and archive APIs; exec: a process with
// the run's work dir and environment on this machine).

// Process is a command to run inside a running run.
type Process struct {
	// Cmd is the argv; it must not be empty.
	Cmd []string
	// Env is KEY=VALUE pairs added to the run's own environment.
	Env []string
	// TTY gives the process a terminal of Cols x Rows; its stderr is then
	// its terminal too.
	TTY        bool
	Cols, Rows uint16
}

// Stdio is where a process's streams go. Stdin may be nil (no input);
// Stderr is unused with a TTY.
type Stdio struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Proc is a process started by Enter.
type Proc interface {
	// Resize changes the terminal's size (a TTY process only).
	Resize(cols, rows uint16) error
	// Wait blocks until the process has ended and its output is written
	// out, and returns its exit code (128+N for a signal N).
	Wait(ctx context.Context) (int, error)
	// Close ends the process if it still runs (a hang-up, then a kill
	// after grace) and releases what it holds.
	Close(grace time.Duration) error
}

// PathStat is a path inside a run, as Stat finds it.
type PathStat struct {
	Name string
	Size int64
	Dir  bool
}

// Enterer is implemented by drivers that can enter a running run.
type Enterer interface {
	// Enter starts p inside run id, wired to stdio.
	Enter(ctx context.Context, id RunID, p Process, stdio Stdio) (Proc, error)
	// DialRun connects to TCP port of run id, as seen from inside it.
	DialRun(ctx context.Context, id RunID, port int) (net.Conn, error)
	// CopyTo unpacks the tar archive r into directory dir of run id.
	CopyTo(ctx context.Context, id RunID, dir string, r io.Reader) error
	// CopyFrom is a tar archive of path inside run id (a file, or a
	// directory and everything under it), named by path's last element.
	CopyFrom(ctx context.Context, id RunID, path string) (io.ReadCloser, PathStat, error)
	// Stat describes path inside run id.
	Stat(ctx context.Context, id RunID, path string) (PathStat, error)
}
