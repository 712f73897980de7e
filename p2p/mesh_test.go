package p2p

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// ptMesh starts n hosts on 127.0.0.1, all approved machines of one org, each
// dialling `degree` random others (plus its ring successor, so the graph is
// connected), and waits until every node has a topic peer.
func ptMesh(tb testing.TB, n, degree int, seed int64) ([]*Host, []*Org) {
	tb.Helper()
	hosts := make([]*Host, n)
	for i := range hosts {
		hosts[i] = ptHost(tb, nil)
	}
	ids := make([]peer.ID, n)
	for i, h := range hosts {
		ids[i] = h.ID()
	}
	m := newPtMembers(ids...)
	orgs := make([]*Org, n)
	for i, h := range hosts {
		o, err := h.JoinOrg(ptOrg, m)
		if err != nil {
			tb.Fatal(err)
		}
		orgs[i] = o
	}
	rng := rand.New(rand.NewSource(seed))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range hosts {
		targets := map[int]bool{(i + 1) % n: true}
		for len(targets) < min(degree, n-1) {
			if j := rng.Intn(n); j != i {
				targets[j] = true
			}
		}
		var addrs []string
		for j := range targets {
			addrs = append(addrs, hosts[j].Addrs()...)
		}
		wg.Add(1)
		go func(h *Host, addrs []string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := h.Connect(ctx, addrs); err != nil {
				errs <- err
			}
		}(hosts[i], addrs)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}
	ptEventually(tb, 30*time.Second, "every node has heartbeat topic peers", func() bool {
		for _, o := range orgs {
			if len(o.hbTopic.ListPeers()) == 0 {
				return false
			}
		}
		return true
	})
	return hosts, orgs
}

func TestMesh10(t *testing.T) {
	const n = 10
	hosts, orgs := ptMesh(t, n, 2, 1)
	var mu sync.Mutex
	seen := make([]map[string]bool, n)
	for i, o := range orgs {
		seen[i] = map[string]bool{}
		o.OnHeartbeat(func(hb Heartbeat) {
			mu.Lock()
			seen[i][hb.Machine] = true
			mu.Unlock()
		})
	}
	complete := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range seen {
			if len(s) != n {
				return false
			}
		}
		return true
	}
	// Publish every 200 ms until every node has seen all 10 machines (the
	// mesh needs a GossipSub heartbeat or two to form).
	ctx := context.Background()
	deadline := time.Now().Add(60 * time.Second)
	for round := 0; !complete(); round++ {
		if time.Now().After(deadline) {
			mu.Lock()
			var counts []int
			for _, s := range seen {
				counts = append(counts, len(s))
			}
			mu.Unlock()
			t.Fatalf("after %d rounds machines seen per node: %v", round, counts)
		}
		for i, o := range orgs {
			if err := o.PublishHeartbeat(ctx, Heartbeat{Name: fmt.Sprintf("m%d", i), Interval: 200}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond) // pacing of the publishers, not a wait for sync
	}
	want := make([]string, n)
	for i, h := range hosts {
		want[i] = h.ID().String()
	}
	sort.Strings(want)
	for i := range seen {
		got := make([]string, 0, n)
		for k := range seen[i] {
			got = append(got, k)
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Fatalf("node %d saw %v", i, got)
		}
	}
	for i, o := range orgs {
		if r := o.Rejected(); len(r) != 0 {
			t.Fatalf("node %d rejected honest traffic: %v", i, r)
		}
	}
}
