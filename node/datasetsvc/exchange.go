package datasetsvc

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/dataset"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
)

// exchange is the node's bitswap with the access rules of the ledger: a block
// goes only to an approved machine of the org whose person may read a
// dataset that holds the block.
type exchange struct {
	x   *dataset.Exchange
	acl blockACL
}

// blockACL maps the blocks this machine holds to the datasets that reach
// them. It is rebuilt when the ledger's datasets change, and when a block is
// asked for that it does not know while some dataset was incomplete at the
// last build (its blocks arrived since).
type blockACL struct {
	mu      sync.Mutex
	key     string
	partial bool
	built   time.Time
	of      map[cid.Cid][]string // block -> names of the datasets that reach it
}

// datasetsKey fingerprints the ledger's datasets.
func datasetsKey(st *ledger.State) string {
	var b strings.Builder
	for _, d := range st.SortedDatasets() {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00", d.Name, d.CID, d.Access)
	}
	return b.String()
}

// peerPerson is the person of an approved machine of the org, or "".
func peerPerson(st *ledger.State, p peer.ID) string {
	m := st.Machines[p.String()]
	if m == nil || m.Status != ledger.MachineApproved || st.Members[m.Owner] == nil {
		return ""
	}
	return m.Owner
}

func (s *Service) allowBlock(p peer.ID, c cid.Cid) bool {
	var (
		person, key string
		ds          []*ledger.Dataset
	)
	s.snapshot(func(st *ledger.State) {
		person = peerPerson(st, p)
		if person == "" {
			return
		}
		key = datasetsKey(st)
		for _, d := range st.SortedDatasets() {
			c := *d
			ds = append(ds, &c)
		}
	})
	if person == "" {
		return false
	}
	names := s.xch.acl.lookup(s.ctx, s.blocks, key, ds, c, s.now())
	ok := false
	s.snapshot(func(st *ledger.State) {
		for _, name := range names {
			if d := st.Datasets[name]; d != nil && st.CanReadDataset(person, d) {
				ok = true
				return
			}
		}
	})
	return ok
}

func (a *blockACL) lookup(ctx context.Context, bs *dataset.Blockstore, key string, ds []*ledger.Dataset, c cid.Cid, now time.Time) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	names, ok := a.of[c]
	stale := a.key != key || (!ok && a.partial && now.Sub(a.built) > time.Second)
	if !stale {
		return names
	}
	a.of, a.key, a.partial, a.built = map[cid.Cid][]string{}, key, false, now
	for _, d := range ds {
		root, err := cid.Decode(d.CID)
		if err != nil {
			continue
		}
		_ = dataset.Walk(ctx, bs, root, func(b cid.Cid, stored bool) error {
			if !stored {
				a.partial = true
			}
			a.of[b] = append(a.of[b], d.Name)
			return nil
		})
	}
	return a.of[c]
}

// peerAsksHave answers the have protocol: only to approved machines of the
// org whose person may read a dataset with that root.
func (s *Service) peerAsksHave(p peer.ID, root cid.Cid) bool {
	ok := false
	s.snapshot(func(st *ledger.State) {
		person := peerPerson(st, p)
		if person == "" {
			return
		}
		for _, d := range st.DatasetsByCID(root.String()) {
			if st.CanReadDataset(person, d) {
				ok = true
			}
		}
	})
	return ok && s.Local(s.ctx, root.String())
}

// datasetHolders asks the online machines of the org whether they hold root.
func (s *Service) datasetHolders(ctx context.Context, root string, local bool) []string {
	c, err := cid.Decode(root)
	if err != nil {
		return nil
	}
	out := s.holders(ctx, c, func(peer.ID) bool { return true })
	if local {
		out = append(out, s.d.Machine)
		sort.Strings(out)
	}
	return out
}

// relayedHolders are the online machines this one reaches only through a
// relay that hold the dataset of root (none are asked when no machine is
// reached through a relay).
func (s *Service) relayedHolders(ctx context.Context, root cid.Cid) []string {
	return s.holders(ctx, root, func(p peer.ID) bool { return s.d.Host.Path(p) == p2p.PathRelayed })
}

// holders asks the online approved machines of the org other than this
// one, those of them which takes, whether they hold c (the have protocol,
// 3 s at most); sorted.
func (s *Service) holders(ctx context.Context, c cid.Cid, which func(peer.ID) bool) []string {
	var ids []peer.ID
	now := s.now()
	s.snapshot(func(st *ledger.State) {
		for _, m := range st.SortedMachines() {
			if m.Status != ledger.MachineApproved || m.ID == s.d.Machine {
				continue
			}
			if p, err := peer.Decode(m.ID); err == nil && which(p) {
				ids = append(ids, p)
			}
		}
	})
	var (
		mu  sync.Mutex
		out []string
		wg  sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for _, p := range ids {
		if _, _, online := s.d.Peers.Liveness(p.String(), now); !online {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := dataset.AskHave(ctx, s.d.Host.LibP2P(), p, c); ok {
				mu.Lock()
				out = append(out, p.String())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	sort.Strings(out)
	return out
}

// fetchDataset fetches every block of d that this machine lacks from the
// org's machines; progress sees the blocks held and known.
func (s *Service) fetchDataset(ctx context.Context, d *ledger.Dataset, progress func(have, known int)) error {
	root, err := cid.Decode(d.CID)
	if err != nil {
		return fmt.Errorf("dataset %s: %w", d.Name, err)
	}
	s.adding.RLock()
	defer s.adding.RUnlock()
	if ok, _ := dataset.Complete(ctx, s.blocks, root); ok {
		return nil
	}
	if s.xch == nil {
		return api.Errorf(http.StatusServiceUnavailable, "dataset %s: the exchange is not running", d.Name)
	}
	if err := s.xch.x.Fetch(ctx, root, progress); err != nil {
		return fmt.Errorf("dataset %s: fetch: %w", d.Name, err)
	}
	return nil
}
