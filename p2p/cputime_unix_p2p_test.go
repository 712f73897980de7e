//go:build unix

package p2p

import (
	"syscall"
	"time"
)

// ptCPUTime is the process's user+system CPU time.
func ptCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
