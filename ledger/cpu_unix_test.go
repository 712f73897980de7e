//go:build unix

package ledger

import (
	"syscall"
	"time"
)

// cpuNow is the process's CPU time so far (user+system).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
