package dataset

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// HaveProtocol asks a machine whether it holds every block of a dataset.
// The request is the root CID's bytes (the asker then closes its side); the
// answer is one byte, 1 for yes, 0 for no or not allowed to say.
const HaveProtocol = "/cshare/dataset-have/1.0.0"

// maxCIDBytes bounds a request: a CIDv1 sha2-256 is 36 bytes.
const maxCIDBytes = 128

// DecodeHaveRequest reads a have request: the bytes of one CID.
func DecodeHaveRequest(b []byte) (cid.Cid, error) {
	if len(b) == 0 || len(b) > maxCIDBytes {
		return cid.Undef, fmt.Errorf("dataset: have request of %d bytes; allowed: 1 to %d", len(b), maxCIDBytes)
	}
	n, c, err := cid.CidFromBytes(b)
	if err != nil {
		return cid.Undef, fmt.Errorf("dataset: have request: %w", err)
	}
	if n != len(b) {
		return cid.Undef, fmt.Errorf("dataset: have request: %d bytes after the CID", len(b)-n)
	}
	return c, nil
}

// ServeHave answers have requests on h with has(asker, root).
func ServeHave(h host.Host, has func(p peer.ID, root cid.Cid) bool) {
	h.SetStreamHandler(HaveProtocol, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := io.ReadAll(io.LimitReader(s, maxCIDBytes+1))
		if err != nil {
			_ = s.Reset()
			return
		}
		c, err := DecodeHaveRequest(b)
		ans := byte(0)
		if err == nil && has(s.Conn().RemotePeer(), c) {
			ans = 1
		}
		_, _ = s.Write([]byte{ans})
	})
}

// AskHave asks p whether it holds every block of root.
func AskHave(ctx context.Context, h host.Host, p peer.ID, root cid.Cid) (bool, error) {
	s, err := h.NewStream(ctx, p, HaveProtocol)
	if err != nil {
		return false, err
	}
	defer s.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(d)
	}
	if _, err := s.Write(root.Bytes()); err != nil {
		_ = s.Reset()
		return false, err
	}
	if err := s.CloseWrite(); err != nil {
		_ = s.Reset()
		return false, err
	}
	var ans [1]byte
	if _, err := io.ReadFull(s, ans[:]); err != nil {
		return false, errors.Join(errors.New("dataset: no have answer"), err)
	}
	return ans[0] == 1, nil
}
