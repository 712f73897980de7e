package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Run directories are recycled. Creating a file or a directory on ext4
// scans the inode bitmap past every inode deleted in the last minute
// (ext4's recently_deleted), so a node that created and deleted five
// inodes per short item (the run's directory, output.log, state.json twice
// through a rename, the exit file) spent more CPU in that scan than the
// item's own process took: 27% of the node's CPU in __ext4_new_inode
// alone. A removed run's directory now goes to a pool (renamed to
// runs/.free-<id>) when its processes are known to be gone, and the next
// Start takes it: its files are truncated and rewritten in place while the
// directory is hidden, and only then is it renamed to runs/<new id>. A run
// thus creates and deletes no inode in the steady state.
//
// A directory is written only while hidden (its name does not match a run
// ID, so List and adoption ignore it), which makes plain writes safe: a
// node killed while preparing one leaves a .free- directory that the next
// process takes back into its pool. The wrapper's pid, known only after
// the run is visible, goes to its own small file, pid, written in place
// in one write with the run's ID (a node killed before it leaves the one
// of the directory's run before, or none: the wrapper is then found by
// its exit file, findWrapper). The exit file names its run too.

const (
	execPidFile = "pid"
	freePrefix  = ".free-"
	// maxFreeRuns bounds the pool: more removed runs than this at once
	// (more slots than that) are deleted as before.
	maxFreeRuns = 64
)

// takeFree returns a hidden run directory to prepare a run in: one from
// the pool, or a new one.
func (e *Exec) takeFree(id RunID) (string, error) {
	e.poolOnce.Do(e.loadPool)
	e.mu.Lock()
	if n := len(e.pool); n > 0 {
		dir := e.pool[n-1]
		e.pool = e.pool[:n-1]
		e.mu.Unlock()
		return dir, nil
	}
	e.mu.Unlock()
	dir := filepath.Join(e.runsDir(), freePrefix+string(id))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("runtime: exec: create run dir: %w", err)
	}
	return dir, nil
}

// giveFree puts a hidden run directory back into the pool, or deletes it
// when the pool is full.
func (e *Exec) giveFree(dir string) {
	// The old output goes now, off the next run's path; a directory
	// that cannot be emptied is not reused.
	if err := os.Truncate(filepath.Join(dir, execLogFile), 0); err == nil || errors.Is(err, fs.ErrNotExist) {
		e.mu.Lock()
		if len(e.pool) < maxFreeRuns {
			e.pool = append(e.pool, dir)
			dir = ""
		}
		e.mu.Unlock()
	}
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// loadPool takes the hidden directories a previous process left (.free-,
// and .removed- from before the pool) into the pool, deleting what does
// not fit.
func (e *Exec) loadPool() {
	ents, err := os.ReadDir(e.runsDir())
	if err != nil {
		return
	}
	for _, ent := range ents {
		n := ent.Name()
		if ent.IsDir() && (strings.HasPrefix(n, freePrefix) || strings.HasPrefix(n, ".removed-")) {
			e.giveFree(filepath.Join(e.runsDir(), n))
		}
		if ent.IsDir() && execIDPattern.MatchString(n) {
			// A run from before: its pooled cgroups stay its own.
			if st, err := e.loadState(RunID(n)); err == nil {
				e.mu.Lock()
				e.markTaken(st)
				e.mu.Unlock()
			}
		}
	}
}

// prepareRun empties dir's files from a run before and writes st into it;
// dir is hidden, so plain writes are safe (see above). It returns the
// output log, open for the command. No file is truncated to nothing and
// written again: ext4 flushes such a file when it is closed (its
// auto_da_alloc), which cost each run a block allocation and a write-out.
// Files are overwritten with spaces instead, which every reader trims.
func prepareRun(dir string, st execState) (*os.File, error) {
	// The exit and pid files of the run before stay: each names its run,
	// and what names another is ignored (parseExit, readPid).
	b, err := stateJSON(st)
	if err == nil {
		err = writePadded(filepath.Join(dir, execStateFile), b)
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: exec: prepare run dir: %w", err)
	}
	logFile, err := os.OpenFile(filepath.Join(dir, execLogFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("runtime: exec: create log: %w", err)
	}
	if fi, err := logFile.Stat(); err != nil || fi.Size() > 0 {
		if err == nil {
			err = logFile.Truncate(0) // giveFree emptied it; this is a spare
		}
		if err != nil {
			logFile.Close()
			return nil, fmt.Errorf("runtime: exec: create log: %w", err)
		}
	}
	return logFile, nil
}

// writePadded writes b at the start of path, padded with spaces to the
// file's length, in one write: a reader sees the old or the new content
// (a process killed in a write of a few bytes leaves it whole), and the
// file is never truncated (see prepareRun).
func writePadded(path string, b []byte) error {
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var fi syscall.Stat_t
	if err := syscall.Fstat(fd, &fi); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if pad := int(fi.Size) - len(b); pad > 0 {
		b = append(b[:len(b):len(b)], bytes.Repeat([]byte{' '}, pad)...)
	}
	if n, err := syscall.Pwrite(fd, b, 0); err != nil || n != len(b) {
		if err == nil {
			err = io.ErrShortWrite
		}
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// writeInPlace replaces path's content without a new inode.
func writeInPlace(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writePid records the wrapper's pid and start time, and the run they
// are of (see above).
func (e *Exec) writePid(id RunID, pid int, start uint64) error {
	return writePadded(filepath.Join(e.runDir(id), execPidFile), []byte(strconv.Itoa(pid)+" "+strconv.FormatUint(start, 10)+" "+string(id)+"\n"))
}

// readPid reads what writePid wrote; 0 when it is missing or incomplete.
func (e *Exec) readPid(id RunID) (int, uint64) {
	b, err := os.ReadFile(filepath.Join(e.runDir(id), execPidFile))
	f := strings.Fields(string(b))
	if err != nil || len(f) != 3 || f[2] != string(id) {
		return 0, 0 // none yet, or the run's before in this directory
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0, 0
	}
	return pid, start
}
