package dataset

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used so far:
// benchmarks report it per GB moved, a figure that, unlike MB/s, does not
// depend on how busy the rest of the machine is.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
