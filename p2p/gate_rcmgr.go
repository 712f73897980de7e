package p2p

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// gatedRM wraps the resource manager so that the protocol of every inbound
// stream is checked against the Gate when it is negotiated: a refused
// stream is reset before its handler runs, whatever package registered it.
type gatedRM struct {
	network.ResourceManager
	g *Gate
}

// GetConnLimit forwards to the wrapped manager (libp2p checks the
// connection manager's watermarks against it).
func (r gatedRM) GetConnLimit() int {
	if l, ok := r.ResourceManager.(interface{ GetConnLimit() int }); ok {
		return l.GetConnLimit()
	}
	return 0
}

func (r gatedRM) OpenStream(p peer.ID, dir network.Direction) (network.StreamManagementScope, error) {
	s, err := r.ResourceManager.OpenStream(p, dir)
	if err != nil || dir != network.DirInbound {
		return s, err
	}
	return gatedStream{StreamManagementScope: s, g: r.g, p: p}, nil
}

type gatedStream struct {
	network.StreamManagementScope
	g *Gate
	p peer.ID
}

// errNotAdmitted refuses a stream's protocol to a peer without the standing.
var errNotAdmitted = fmt.Errorf("p2p: peer may not use this protocol (not a machine of the org)")

func (s gatedStream) SetProtocol(proto protocol.ID) error {
	if !s.g.allows(s.p, streamNeed(proto)) {
		s.g.h.refusedStream(proto)
		return errNotAdmitted
	}
	return s.StreamManagementScope.SetProtocol(proto)
}

// refusedStream counts a stream refused at negotiation.
func (h *Host) refusedStream(proto protocol.ID) {
	if h == nil || h.refused == nil {
		return
	}
	h.refused.WithLabelValues("stream " + string(proto)).Inc()
}
