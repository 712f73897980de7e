//go:build chaos

package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// gpuEvery: every gpuEvery-th job asks one GPU per instance (the nodes
// record two GPUs each; see startNodes).
const gpuEvery = 3

// submission is what the workload asked of a job.
type submission struct {
	items, gpus int64
}

// workload submits a job every interval through a random node until stop
// is closed.
type workload struct {
	ns              []*node
	runLog, failDir string
	rng             *rand.Rand

	mu        sync.Mutex
	submitted map[string]submission // by job ID, for submits that answered
	attempts  int
	failed    []string // submits that got no answer or an error
}

func (w *workload) run(stop <-chan struct{}, every time.Duration) {
	for k := 1; ; k++ {
		select {
		case <-stop:
			return
		case <-time.After(every):
		}
		w.mu.Lock()
		n := w.ns[w.rng.IntN(len(w.ns))]
		sub := submission{items: int64(20 + w.rng.IntN(31))}
		w.attempts++
		w.mu.Unlock()
		if k%gpuEvery == 0 {
			sub.gpus = 1
		}
		args := append([]string{"job", "submit", "--driver", "exec", "--cpus", "2", "--max-cpus", "6", "--retries", "2",
			"--gpus", fmt.Sprint(sub.gpus), "--name", fmt.Sprintf("chaos-%d", k), "--range", fmt.Sprintf("1-%d", sub.items), "--"},
			itemCmd(w.runLog, w.failDir)...)
		out, err := n.cli(15*time.Second, args...)
		w.mu.Lock()
		if err != nil {
			w.failed = append(w.failed, err.Error())
		} else {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			w.submitted[strings.TrimSpace(lines[len(lines)-1])] = sub
		}
		w.mu.Unlock()
	}
}
