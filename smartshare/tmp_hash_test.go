package smartshare

import (
	"runtime"
	"testing"
	"crypto/sha256"
)

func TestTmpHash(t *testing.T) {
	runtime.GOMAXPROCS(1)
	in := benchInput(100000, 1000000, false)
	r := Plan(in)
	c := cpuNow()
	for i := 0; i < 5; i++ { hashResult(r.Instances, r.Preempt) }
	t.Logf("hashResult %v", (cpuNow()-c)/5)
	b := make([]byte, 16<<20)
	c = cpuNow()
	for i := 0; i < 5; i++ { sha256.Sum256(b) }
	t.Logf("sha 16MB %v", (cpuNow()-c)/5)
	c = cpuNow()
	for i := 0; i < 5; i++ { x := make([]Instance, 1000000); _ = x }
	t.Logf("alloc 1M inst %v", (cpuNow()-c)/5)
}
