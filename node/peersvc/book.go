package peersvc

import (
	"encoding/json"
	"log/slog"
	"slices"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"
)

// The address book: for each machine, the addresses it can be dialled at,
// freshest first, kept in the store's metadata (BookKey) so a restarted
// node can find the org again without an org key. Addresses come from
// signed heartbeats (a machine's own list of its current addresses), from
// the heartbeats a peer relays at start (learnMachines), from the org key
// a node joined with (orgsvc, through RememberPeer), and from the
// peerstore of connected machines (identify). A machine's fresh list goes
// first and older addresses it no longer names are kept after it, up to
// maxAddrsPerPeer: a laptop that moves between networks and back is still
// found at the address it had before.
const maxAddrsPerPeer = 16

// BookKey is the store metadata key under which the address book is kept.
const BookKey = "peers"

// book is the address book, with its lock.
type book struct {
	meta Meta
	log  *slog.Logger

	mu    sync.Mutex
	known map[string][]string // machine ID -> last known addresses
}

// RememberPeer merges addrs (current addresses of machine id, best first)
// into the address book and persists it when it changed.
func (s *Service) RememberPeer(id string, addrs []string) {
	if id == s.idStr || len(addrs) == 0 {
		return
	}
	s.book.remember(id, addrs)
}

func (b *book) remember(id string, addrs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.known == nil {
		b.known = map[string][]string{}
	}
	old := b.known[id]
	if len(old) >= len(addrs) && slices.Equal(old[:len(addrs)], addrs) {
		return // what every heartbeat of a machine that has not moved says
	}
	merged := mergeAddrs(addrs, old, maxAddrsPerPeer)
	if slices.Equal(old, merged) {
		return
	}
	b.known[id] = merged
	b.saveLocked()
}

// learn adds extra (what the peerstore knows of machine id: a connected
// machine's listen addresses, from identify) after the addresses the book
// has for it: those come from the machine itself and stay first.
func (b *book) learn(id peer.ID, extra []string) {
	if len(extra) == 0 {
		return
	}
	key := id.String()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.known == nil {
		b.known = map[string][]string{}
	}
	merged := mergeAddrs(b.known[key], extra, maxAddrsPerPeer)
	if slices.Equal(b.known[key], merged) {
		return
	}
	b.known[key] = merged
	b.saveLocked()
}

func (b *book) saveLocked() {
	data, _ := json.Marshal(b.known)
	if err := b.meta.SetMeta(BookKey, data); err != nil {
		b.log.Debug("save the address book", "err", err)
	}
}

// addrs is the address book's list for machine id.
func (b *book) addrs(id string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.known[id])
}

// load reads the address book from the store.
func (b *book) load() {
	data, err := b.meta.Meta(BookKey)
	if err != nil {
		return
	}
	var known map[string][]string
	if json.Unmarshal(data, &known) != nil {
		b.log.Warn("the stored address book does not decode; starting without it")
		return
	}
	b.mu.Lock()
	b.known = known
	b.mu.Unlock()
}

// mergeAddrs is fresh, then the addresses of old not in fresh, without
// duplicates, at most max of them.
func mergeAddrs(fresh, old []string, max int) []string {
	out := make([]string, 0, min(len(fresh)+len(old), max))
	seen := map[string]bool{}
	for _, list := range [][]string{fresh, old} {
		for _, a := range list {
			if a == "" || seen[a] || len(out) == max {
				continue
			}
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}
