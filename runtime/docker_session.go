package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

var _ Enterer = (*Docker)(nil)

// DockerExecAPI is the part of the Docker SDK client that entering a
// container takes (exec and archives). *client.Client implements it; a
// DockerAPI that does not cannot be entered.
type DockerExecAPI interface {
	ContainerExecCreate(ctx context.Context, container string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, config container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerExecResize(ctx context.Context, execID string, options container.ResizeOptions) error
	ContainerExecInspect(ctx context.Context, execID string) (container.ExecInspect, error)
	CopyToContainer(ctx context.Context, containerID, dstPath string, content io.Reader, options container.CopyToContainerOptions) error
	CopyFromContainer(ctx context.Context, containerID, srcPath string) (io.ReadCloser, container.PathStat, error)
	ContainerStatPath(ctx context.Context, containerID, path string) (container.PathStat, error)
}

// execDetachKeys replace Docker's default detach keys (ctrl-p,ctrl-q), so
// that a terminal session gets every key a person types; Docker holds back
// a key of the sequence only until the next one differs.
const execDetachKeys = "ctrl-],ctrl-^,ctrl-]"

func (d *Docker) execAPI() (DockerExecAPI, error) {
	x, ok := d.cli.(DockerExecAPI)
	if !ok {
		return nil, errors.New("runtime: this Docker client cannot exec into containers")
	}
	return x, nil
}

// Enter runs p in container id with Docker's exec API: created with a
// TTY or not, attached, resized, and inspected for the exit code.
func (d *Docker) Enter(ctx context.Context, id RunID, p Process, stdio Stdio) (Proc, error) {
	if len(p.Cmd) == 0 {
		return nil, specErr("cmd", "is required")
	}
	x, err := d.execAPI()
	if err != nil {
		return nil, err
	}
	opts := container.ExecOptions{Tty: p.TTY, AttachStdin: stdio.Stdin != nil, AttachStdout: true, AttachStderr: true,
		Env: p.Env, Cmd: p.Cmd, DetachKeys: execDetachKeys}
	created, err := x.ContainerExecCreate(ctx, string(id), opts)
	if err != nil {
		if isNotFound(err) {
			return nil, notFound(id)
		}
		return nil, fmt.Errorf("runtime: exec in %s: %w", idShort(id), err)
	}
	hj, err := x.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{Tty: p.TTY})
	if err != nil {
		return nil, fmt.Errorf("runtime: attach to exec in %s: %w", idShort(id), err)
	}
	pr := &dockerProc{x: x, exec: created.ID, hj: hj, out: make(chan struct{})}
	if p.TTY && p.Cols > 0 && p.Rows > 0 {
		_ = pr.Resize(p.Cols, p.Rows)
	}
	if stdio.Stdin != nil {
		go func() {
			_, _ = io.Copy(hj.Conn, stdio.Stdin)
			if p.TTY {
				// The end of a terminal's input is its EOF character,
				// as a person types it: closing the engine's side would
				// take the terminal down, and with it what the process
				// has still to write.
				_, _ = hj.Conn.Write([]byte{4})
				return
			}
			_ = hj.CloseWrite()
		}()
	}
	go func() {
		defer close(pr.out)
		if p.TTY {
			_, pr.outErr = io.Copy(stdio.Stdout, hj.Reader)
		} else {
			_, pr.outErr = stdcopy.StdCopy(stdio.Stdout, stdio.Stderr, hj.Reader)
		}
	}()
	return pr, nil
}

// dockerProc is a process started with Docker's exec API.
type dockerProc struct {
	x      DockerExecAPI
	exec   string
	hj     types.HijackedResponse
	out    chan struct{} // closed when the output has been copied out
	outErr error

	closeOnce sync.Once
}

func (p *dockerProc) Resize(cols, rows uint16) error {
	return p.x.ContainerExecResize(context.Background(), p.exec, container.ResizeOptions{Width: uint(cols), Height: uint(rows)})
}

// Wait waits for the output to end, then for the engine to see the
// process gone (it may say running for a moment after its streams close).
func (p *dockerProc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.out:
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		ins, err := p.x.ContainerExecInspect(ctx, p.exec)
		if err != nil {
			return -1, fmt.Errorf("runtime: inspect exec: %w", err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// Close hangs up a process that still runs (the engine has no call to
// signal an exec: its host PID gets SIGHUP, then SIGKILL after grace, when
// this node may signal it), then closes the streams.
func (p *dockerProc) Close(grace time.Duration) error {
	p.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), grace+5*time.Second)
		defer cancel()
		if ins, err := p.x.ContainerExecInspect(ctx, p.exec); err == nil && ins.Running && ins.Pid > 0 {
			_ = syscall.Kill(ins.Pid, syscall.SIGHUP)
			deadline := time.Now().Add(grace)
			for time.Now().Before(deadline) {
				if ins, err := p.x.ContainerExecInspect(ctx, p.exec); err != nil || !ins.Running {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if ins, err := p.x.ContainerExecInspect(ctx, p.exec); err == nil && ins.Running && ins.Pid > 0 {
				_ = syscall.Kill(ins.Pid, syscall.SIGKILL)
			}
		}
		p.hj.Close()
	})
	return nil
}

// DialRun connects to port on the container's address on its network
// (the first network by name, for a container on several).
func (d *Docker) DialRun(ctx context.Context, id RunID, port int) (net.Conn, error) {
	ins, err := d.cli.ContainerInspect(ctx, string(id))
	if err != nil {
		if isNotFound(err) {
			return nil, notFound(id)
		}
		return nil, fmt.Errorf("runtime: inspect %s: %w", idShort(id), err)
	}
	ip := ""
	if ns := ins.NetworkSettings; ns != nil {
		names := make([]string, 0, len(ns.Networks))
		for n := range ns.Networks {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if e := ns.Networks[n]; e != nil && e.IPAddress != "" {
				ip = e.IPAddress
				break
			}
		}
	}
	if ip == "" {
		return nil, fmt.Errorf("runtime: container %s has no network address (network mode %q)", idShort(id), hostNetMode(ins))
	}
	var dl net.Dialer
	return dl.DialContext(ctx, "tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
}

func hostNetMode(ins container.InspectResponse) string {
	if ins.HostConfig == nil {
		return ""
	}
	return string(ins.HostConfig.NetworkMode)
}

// CopyTo unpacks the tar archive r into dir of container id (Docker's
// archive API; the directory must exist).
func (d *Docker) CopyTo(ctx context.Context, id RunID, dir string, r io.Reader) error {
	x, err := d.execAPI()
	if err != nil {
		return err
	}
	if err := x.CopyToContainer(ctx, string(id), dir, r, container.CopyToContainerOptions{}); err != nil {
		if isNotFound(err) {
			return fmt.Errorf("%w: %s in %s: %v", ErrNotFound, dir, idShort(id), err)
		}
		return fmt.Errorf("runtime: copy into %s: %w", idShort(id), err)
	}
	return nil
}

// CopyFrom is a tar archive of p in container id (Docker's archive API).
func (d *Docker) CopyFrom(ctx context.Context, id RunID, p string) (io.ReadCloser, PathStat, error) {
	x, err := d.execAPI()
	if err != nil {
		return nil, PathStat{}, err
	}
	rc, st, err := x.CopyFromContainer(ctx, string(id), p)
	if err != nil {
		if isNotFound(err) {
			return nil, PathStat{}, fmt.Errorf("%w: %s in %s", ErrNotFound, p, idShort(id))
		}
		return nil, PathStat{}, fmt.Errorf("runtime: copy from %s: %w", idShort(id), err)
	}
	return rc, pathStat(st), nil
}

// Stat describes p in container id.
func (d *Docker) Stat(ctx context.Context, id RunID, p string) (PathStat, error) {
	x, err := d.execAPI()
	if err != nil {
		return PathStat{}, err
	}
	st, err := x.ContainerStatPath(ctx, string(id), p)
	if err != nil {
		if isNotFound(err) {
			return PathStat{}, fmt.Errorf("%w: %s in %s", ErrNotFound, p, idShort(id))
		}
		return PathStat{}, fmt.Errorf("runtime: stat in %s: %w", idShort(id), err)
	}
	return pathStat(st), nil
}

func pathStat(st container.PathStat) PathStat {
	name := st.Name
	if name == "" {
		name = path.Base(st.LinkTarget)
	}
	return PathStat{Name: name, Size: st.Size, Dir: st.Mode.IsDir()}
}
