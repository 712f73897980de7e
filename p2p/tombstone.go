package p2p

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// TombstoneProtocol is the stream protocol with which a node that was away
// when its org was deleted asks a machine it used to share the org with
// whether the org was deleted, after every node of it has left and stopped
// gossiping for it.
//
// Wire: the client sends one frame (as in SyncProtocol), a CBOR map
// {"org": ID}; the server answers with one frame {"entry": raw} (the raw
// org.delete entry it keeps for that org) or {} (it knows of none), and
// closes. Anybody who names an org ID is answered: a tombstone says only
// that the org is gone, and the asker must check the entry itself (it is a
// signed ledger entry; see node's checkTombstone).
const TombstoneProtocol = protocol.ID("/cshare/tombstone/1.0.0")

// Tombstone limits.
const (
	maxTombstoneRequest = 1024
	// maxTombstoneResponse: one ledger entry (64 KiB at most) and the
	// frame's CBOR around it.
	maxTombstoneResponse = 64<<10 + 64
	tombstoneTimeout     = 20 * time.Second
	maxOrgIDLen          = 256
)

// TombstoneSource is the node's side of TombstoneProtocol.
type TombstoneSource interface {
	// Tombstone is the raw org.delete entry this node keeps for org, or
	// nil.
	Tombstone(org string) []byte
}

type tombstoneReq struct {
	Org string `cbor:"org"`
}

type tombstoneResp struct {
	Entry []byte `cbor:"entry,omitempty"`
	Err   string `cbor:"err,omitempty"`
}

// ErrTombstoneRefused says the machine asked refused the request.
var ErrTombstoneRefused = errors.New("p2p: tombstone request refused")

// decodeTombstoneRequest reads and checks a request frame's contents: the
// org ID is required, at most 256 bytes, without '/' or NUL (as JoinOrg
// wants it).
func decodeTombstoneRequest(b []byte) (string, error) {
	if len(b) > maxTombstoneRequest {
		return "", fmt.Errorf("%w: tombstone request of %d bytes", ErrTooLarge, len(b))
	}
	var req tombstoneReq
	if err := syncDec.Unmarshal(b, &req); err != nil {
		return "", fmt.Errorf("p2p: tombstone request: %w", err)
	}
	if err := checkOrgID(req.Org); err != nil {
		return "", fmt.Errorf("p2p: tombstone request: %w", err)
	}
	return req.Org, nil
}

// decodeTombstoneResponse reads a response frame's contents: the raw entry,
// nil when the peer has none, or the peer's refusal.
func decodeTombstoneResponse(b []byte) ([]byte, error) {
	if len(b) > maxTombstoneResponse {
		return nil, fmt.Errorf("%w: tombstone response of %d bytes", ErrTooLarge, len(b))
	}
	var resp tombstoneResp
	if err := syncDec.Unmarshal(b, &resp); err != nil {
		return nil, fmt.Errorf("p2p: tombstone response: %w", err)
	}
	if resp.Err != "" {
		return nil, fmt.Errorf("%w: %s", ErrTombstoneRefused, resp.Err)
	}
	if len(resp.Entry) == 0 {
		return nil, nil
	}
	return resp.Entry, nil
}

// checkOrgID says what is wrong with an org ID received from a peer.
func checkOrgID(org string) error {
	switch {
	case org == "":
		return errors.New("org: required")
	case len(org) > maxOrgIDLen:
		return fmt.Errorf("org: %d bytes; at most %d allowed", len(org), maxOrgIDLen)
	case org == "." || org == ".." || strings.ContainsAny(org, "/\\\x00"):
		return fmt.Errorf("org: %q is no org ID (no '/', '\\' or NUL allowed)", org)
	}
	return nil
}

// ServeTombstones registers the tombstone protocol handler on h.
func ServeTombstones(h host.Host, src TombstoneSource) {
	serveOneShot(h, TombstoneProtocol, tombstoneTimeout, maxTombstoneRequest, func(b []byte, _ peer.ID) any {
		org, err := decodeTombstoneRequest(b)
		if err != nil {
			return tombstoneResp{Err: err.Error()}
		}
		return tombstoneResp{Entry: src.Tombstone(org)}
	})
}

// FetchTombstone asks machine p for the tombstone of org: the raw org.delete
// entry it keeps, or nil (and no error) when it has none. The entry is not
// checked here.
func FetchTombstone(ctx context.Context, h host.Host, p peer.ID, org string) ([]byte, error) {
	if err := checkOrgID(org); err != nil {
		return nil, fmt.Errorf("p2p: tombstone request: %w", err)
	}
	s, r, err := request(ctx, h, p, TombstoneProtocol, tombstoneTimeout, tombstoneReq{Org: org})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	b, err := hbReadFrame(r, maxTombstoneResponse)
	if err != nil {
		_ = s.Reset()
		return nil, fmt.Errorf("p2p: tombstone response from %s: %w", p, err)
	}
	return decodeTombstoneResponse(b)
}
