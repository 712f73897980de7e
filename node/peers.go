package node

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"time"
)

const peersMetaKey = "peers"

// rememberPeer keeps a machine's addresses so a restarted node can find the
// org again without an org key.
func (n *Node) rememberPeer(id string, addrs []string) {
	if id == n.id.String() || len(addrs) == 0 {
		return
	}
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	if n.known == nil {
		n.known = map[string][]string{}
	}
	a := append([]string(nil), addrs...)
	sort.Strings(a)
	if reflect.DeepEqual(n.known[id], a) {
		return
	}
	n.known[id] = a
	b, _ := json.Marshal(n.known)
	if n.store != nil {
		_ = n.store.SetMeta(peersMetaKey, b)
	}
}

// dialKnownPeers reconnects to the machines this node knew before it stopped.
func (n *Node) dialKnownPeers() {
	b, err := n.store.Meta(peersMetaKey)
	if err != nil {
		return
	}
	var known map[string][]string
	if json.Unmarshal(b, &known) != nil {
		return
	}
	n.peersMu.Lock()
	n.known = known
	n.peersMu.Unlock()
	for _, addrs := range known {
		n.spawn(func() {
			ctx, c := context.WithTimeout(n.ctx, 15*time.Second)
			defer c()
			_ = n.host.Connect(ctx, addrs)
		})
	}
}
