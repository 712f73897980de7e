//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
)

// TestKill9DuringWrites kills a node with -9 at random moments during a
// stream of API writes (job submits), 50 times. After every restart the
// store opens and every job whose submit the API acknowledged is there: an
// acknowledged write survives kill -9. CSHARE_CRASH_ROUNDS changes the
// number of kills; CSHARE_CRASH_SEED the random moments.
func TestKill9DuringWrites(t *testing.T) {
	rounds := 50
	if s := os.Getenv("CSHARE_CRASH_ROUNDS"); s != "" {
		_, _ = fmt.Sscan(s, &rounds)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CSHARE_CRASH_SEED"); s != "" {
		_, _ = fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (CSHARE_CRASH_SEED to repeat)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))

	// No driver: the jobs stay queued, so the writes are the submits alone.
	conf := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(conf, []byte("runtime: {docker: false, exec: false}\ndiscovery: {mdns: false}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startNode(t, "crash", "--config", conf)
	p.must("org", "create", "--name", "crash")

	var acked []string // job IDs whose submit was answered 200
	inFlight := 0      // submits cut off by the kill (sent, never answered)
	for round := 0; round <= rounds; round++ {
		cl, err := api.DialDataDir(p.dir, "")
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		// The store opened (the API answers only after) and holds every
		// acknowledged job.
		jobs, err := cl.Jobs(context.Background())
		if err != nil {
			t.Fatalf("round %d: the restarted node does not answer: %v", round, err)
		}
		have := make(map[string]bool, len(jobs))
		for _, j := range jobs {
			have[j.ID] = true
		}
		for _, id := range acked {
			if !have[id] {
				t.Fatalf("round %d: job %s was acknowledged before a kill -9 and is gone (%d acknowledged, %d listed)", round, id, len(acked), len(jobs))
			}
		}
		if round == rounds {
			break
		}

		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first sync.Once
		started := make(chan struct{})
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					first.Do(func() { close(started) })
					res, err := cl.SubmitJob(ctx, api.JobSubmit{Name: fmt.Sprintf("r%d-w%d-%d", round, w, i), Cmd: []string{"true"}})
					if err != nil {
						mu.Lock()
						inFlight++
						mu.Unlock()
						return
					}
					mu.Lock()
					acked = append(acked, res.ID)
					mu.Unlock()
				}
			}()
		}
		<-started
		// A random moment within the stream of writes.
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		p.kill9()
		wg.Wait()
		cancel()
		p.start()
	}
	if len(acked) < rounds {
		t.Fatalf("only %d writes acknowledged in %d rounds: the test did not exercise the store", len(acked), rounds)
	}
	t.Logf("%d kills, %d acknowledged submits all present after each restart, %d submits cut off", rounds, len(acked), inFlight)
}
