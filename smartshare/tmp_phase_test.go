package smartshare

import (
	"testing"
	"time"
	"runtime"
)

func TestTmpPhases(t *testing.T) {
	for _, sz := range [][2]int{{10000, 100000}, {100000, 1000000}} {
		in := benchInput(sz[0], sz[1], false)
		runtime.GC()
		for rep := 0; rep < 3; rep++ {
			var ts []time.Duration
			t0 := time.Now()
			mark := func() { ts = append(ts, time.Since(t0)); t0 = time.Now() }
			p := &planner{in: &in}
			p.init(); mark()
			p.keep(); mark()
			p.countModel(); mark()
			p.pickExcessVictims(); mark()
			p.placePrimaries(); mark()
			p.placeSecondaries(); mark()
			r := p.result(); mark()
			_ = r
			t.Logf("%v: init %v keep %v count %v victims %v prim %v sec %v result %v", sz, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6])
		}
	}
}
