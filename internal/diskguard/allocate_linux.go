package diskguard

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// allocate gives f size bytes of allocated blocks: fallocate where the
// filesystem has it, else zeros written.
func allocate(f *os.File, size int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return writeZeros(f, size)
	}
	return err
}
