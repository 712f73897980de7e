package smartshare

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestTmpPhases(t *testing.T) {
	runtime.GOMAXPROCS(1)
	for _, gc := range []int{-1, 100} {
		debug.SetGCPercent(gc)
		for _, sz := range [][2]int{{10000, 100000}, {100000, 1000000}} {
			in := benchInput(sz[0], sz[1], false)
			runtime.GC()
			var tot [8]time.Duration
			n := 5
			for rep := 0; rep < n; rep++ {
				i := 0
				t0 := cpuNow()
				mark := func() { c := cpuNow(); tot[i] += c - t0; t0 = c; i++ }
				p := &planner{in: &in}
				p.init(); mark()
				p.keep(); mark()
				p.countModel(); mark()
				p.pickExcessVictims(); mark()
				p.placePrimaries(); mark()
				p.placeSecondaries(); mark()
				r := p.result(); mark()
				_ = r
			}
			for i := range tot { tot[i] /= time.Duration(n) }
			t.Logf("gc=%d %v: init %v keep %v count %v victims %v prim %v sec %v result %v", gc, sz, tot[0], tot[1], tot[2], tot[3], tot[4], tot[5], tot[6])
		}
	}
	debug.SetGCPercent(100)
}
