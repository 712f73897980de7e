//go:build !unix

// Package cputime owns the one measure of CPU that benchmarks report beside
// wall time (see cputime.go); here it is not available.
package cputime

import "time"

// Now is 0: the process's CPU time is not read on this platform.
func Now() time.Duration { return 0 }
