package smartshare

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestTmpCPU(t *testing.T) {
	runtime.GOMAXPROCS(1)
	for _, sz := range [][2]int{{10000, 100000}, {100000, 1000000}, {10000, 10000}, {10000, 1000000}} {
		in := benchInput(sz[0], sz[1], false)
		runtime.GC()
		n := 30
		if sz[1] >= 1000000 { n = 5 }
		Plan(in)
		c0 := cpuNow()
		w0 := time.Now()
		for i := 0; i < n; i++ { Plan(in) }
		t.Logf("%v: cpu %v/op wall %v/op", sz, (cpuNow()-c0)/time.Duration(n), time.Since(w0)/time.Duration(n))
	}
}
