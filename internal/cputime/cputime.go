//go:build unix

// Package cputime owns the one measure of CPU that benchmarks report beside
// wall time: on a shared, loaded machine wall time also measures the
// neighbours, and the process's own CPU time is the steadier figure.
package cputime

import (
	"syscall"
	"time"
)

// Now is the process's CPU time so far (user and system, all threads), or
// 0 where it cannot be read.
func Now() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
