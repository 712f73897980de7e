//go:build unix

package diskguard

import (
	"io/fs"
	"syscall"

	"golang.org/x/sys/unix"
)

// statfs is the space available to an unprivileged user on dir's
// filesystem (a root node could use the blocks reserved for root too:
// they are left alone).
func statfs(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// allocated is the bytes a file takes on disk: its blocks, not its size (a
// sparse file's holes are not space held).
func allocated(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}
