package smartshare

import (
	"testing"
)

func BenchmarkTmpKeep(b *testing.B) {
	in := benchInput(100000, 1000000, false)
	for b.Loop() {
		p := &planner{in: &in}
		p.init()
		p.keep()
	}
}
