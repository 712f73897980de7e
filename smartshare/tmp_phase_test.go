package smartshare

import (
	"runtime"
	"testing"
	"time"
)

func TestTmpPhases(t *testing.T) {
	runtime.GOMAXPROCS(1)
	for _, sz := range [][2]int{{10000, 100000}, {100000, 1000000}} {
		in := benchInput(sz[0], sz[1], false)
		runtime.GC()
		var best [8]time.Duration
		for i := range best { best[i] = time.Hour }
		for rep := 0; rep < 8; rep++ {
			i := 0
			t0 := time.Now()
			mark := func() { c := time.Now(); best[i] = min(best[i], c.Sub(t0)); t0 = c; i++ }
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
		var sum time.Duration
		for _, b := range best[:7] { sum += b }
		t.Logf("%v: init %v keep %v count %v victims %v prim %v sec %v result %v  sum %v", sz, best[0], best[1], best[2], best[3], best[4], best[5], best[6], sum)
	}
}
