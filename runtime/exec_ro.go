package runtime

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// Read-only mounts of the exec driver. A run with ReadOnly mounts starts in
// a private mount namespace of its own (root only: creating one needs
// CAP_SYS_ADMIN). There the wrapper bind-mounts each ReadOnly source onto
// itself and remounts that read-only, so a write through the run's link (or
// the source's own path) fails with EROFS even for root; then it runs the
// command with CAP_SYS_ADMIN dropped from its capability sets (setpriv), so
// the command cannot remount it writable or leave the namespace. The mounts
// die with the namespace: nothing is left on the host. A node that is not
// root cannot make the namespace; its runs see the sources through links
// and only the files' modes (0444, directories 0555) stand in the way,
// which the files' owner can change.

// roPrelude makes the read-only binds. $1 is the exit file, $2 the number
// of paths that follow.
const roPrelude = `f=$1; n=$2; shift 2
while [ "$n" -gt 0 ]; do
  if ! mount --bind -- "$1" "$1" || ! mount -o remount,bind,ro -- "$1"; then
    echo "cshare: cannot mount $1 read-only" >&2
    echo 125 > "$f.tmp" && mv -f "$f.tmp" "$f"
    exit 125
  fi
  shift; n=$((n-1))
done
`

// dropSysAdmin runs "$@" without CAP_SYS_ADMIN.
var dropSysAdmin = []string{"setpriv", "--inh-caps=-sys_admin", "--bounding-set=-sys_admin", "--"}

// readOnlySources are the sources of s's ReadOnly mounts, absolute.
func readOnlySources(s Spec) []string {
	var out []string
	for _, m := range s.Mounts {
		if !m.ReadOnly {
			continue
		}
		src := m.Source
		if abs, err := filepath.Abs(src); err == nil {
			src = abs
		}
		out = append(out, src)
	}
	return out
}

// wrapperArgs are /bin/sh's arguments for a run: the wrapper, preceded when
// ro is not empty and the node is root by the read-only binds, with the
// command stripped of CAP_SYS_ADMIN; and the SysProcAttr to start it with.
func wrapperArgs(exitPath, procs string, ro []string, cmd []string) ([]string, *syscall.SysProcAttr, error) {
	attr := &syscall.SysProcAttr{Setsid: true}
	if len(ro) == 0 || os.Geteuid() != 0 {
		return append([]string{"-c", wrapperScript, "cshare-run", exitPath, procs}, cmd...), attr, nil
	}
	for _, tool := range []string{"mount", "setpriv"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, nil, fmt.Errorf("runtime: exec: read-only mounts need util-linux %s on PATH: %w", tool, err)
		}
	}
	attr.Unshareflags = syscall.CLONE_NEWNS // Go makes / private (MS_REC|MS_PRIVATE) in it
	args := []string{"-c", roPrelude + "exec /bin/sh -c \"$0\" cshare-run \"$f\" \"$@\"", wrapperScript, exitPath, strconv.Itoa(len(ro))}
	args = append(args, ro...)
	args = append(args, procs)
	args = append(args, dropSysAdmin...)
	return append(args, cmd...), attr, nil
}
