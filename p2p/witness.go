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

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
)

// WitnessProtocol is the stream protocol with which a joining machine asks an
// approved machine of the org to witness its redemption of an invite (or of
// an org key with an expiry or a count of uses, see ledger.NeedsWitness): the
// witness checks the capability against its own ledger and its own clock,
// and countersigns "machine J presented this capability at my time T". The
// fold accepts the redemption only with such a witness, so a joiner cannot
// back-date it.
//
// Wire: the client sends one frame (as in SyncProtocol), a CBOR map
// {"org", "cap"}, and the server answers with one frame {"witness": W} or
// {"err": reason} (one line), and closes. The joiner witnessed is always
// the stream's authenticated remote peer: the request names no joiner.
const WitnessProtocol = protocol.ID("/cshare/witness/1.0.0")

// Witness limits.
const (
	maxWitnessFrame  = 4096 // bytes of a request or a response frame
	maxWitnessReason = 400  // bytes of a refusal reason
	witnessTimeout   = 30 * time.Second
)

// WitnessRequest is a joiner's request: the capability it redeems in Org.
type WitnessRequest struct {
	Org string            `cbor:"org"`
	Cap ledger.Capability `cbor:"cap"`
}

type witnessResponse struct {
	Witness *ledger.Witness `cbor:"witness,omitempty"`
	Err     string          `cbor:"err,omitempty"`
}

// WitnessSource is the node's side of WitnessProtocol.
type WitnessSource interface {
	// Witness countersigns joiner's redemption of c in org, or refuses with
	// a one-line reason that says what to do.
	Witness(org string, c ledger.Capability, joiner peer.ID) (ledger.Witness, error)
}

// ErrWitnessRefused says the machine asked refused to witness the redemption;
// the error's text after it is the machine's one-line reason.
var ErrWitnessRefused = errors.New("p2p: witness refused")

// decodeWitnessRequest reads and checks a request frame's contents: its size
// and the shape of the capability (its signature and authority are the
// source's questions).
func decodeWitnessRequest(b []byte) (WitnessRequest, error) {
	var req WitnessRequest
	if len(b) > maxWitnessFrame {
		return req, fmt.Errorf("%w: witness request of %d bytes", ErrTooLarge, len(b))
	}
	if err := syncDec.Unmarshal(b, &req); err != nil {
		return req, fmt.Errorf("p2p: witness request: %w", err)
	}
	c := req.Cap
	switch {
	case req.Org == "":
		return req, errors.New("p2p: witness request: org is required")
	case c.Org != req.Org:
		return req, errors.New("p2p: witness request: the capability is for another org")
	case c.Kind != ledger.CapOrgKey && c.Kind != ledger.CapInvite:
		return req, fmt.Errorf("p2p: witness request: capability kind %s; allowed: orgkey, invite", text.Quote(c.Kind))
	case c.ID == "" || len(c.ID) > 64:
		return req, errors.New("p2p: witness request: capability id must be 1 to 64 bytes")
	case c.Expires < 0 || c.Uses < 0:
		return req, errors.New("p2p: witness request: capability expiry and uses must not be negative")
	case len(c.Issuer) == 0 || len(c.Sig) == 0:
		return req, errors.New("p2p: witness request: the capability is unsigned")
	}
	return req, nil
}

// decodeWitnessResponse reads a response frame's contents: a witness, or a
// refusal (an error wrapping ErrWitnessRefused with the reason, escaped and
// cut to one short line).
func decodeWitnessResponse(b []byte) (ledger.Witness, error) {
	var resp witnessResponse
	if len(b) > maxWitnessFrame {
		return ledger.Witness{}, fmt.Errorf("%w: witness response of %d bytes", ErrTooLarge, len(b))
	}
	if err := syncDec.Unmarshal(b, &resp); err != nil {
		return ledger.Witness{}, fmt.Errorf("p2p: witness response: %w", err)
	}
	switch {
	case resp.Err != "" && resp.Witness != nil:
		return ledger.Witness{}, errors.New("p2p: witness response: both a witness and a refusal")
	case resp.Err != "":
		return ledger.Witness{}, fmt.Errorf("%w: %s", ErrWitnessRefused, oneLine(resp.Err))
	case resp.Witness == nil:
		return ledger.Witness{}, errors.New("p2p: witness response: neither a witness nor a refusal")
	}
	return *resp.Witness, nil
}

// oneLine is a remote reason made safe to print: escaped (no control
// characters, so no line breaks) and at most maxWitnessReason bytes.
func oneLine(s string) string {
	s = text.Escape(s)
	if len(s) > maxWitnessReason {
		cut := maxWitnessReason
		for cut > 0 && s[cut]&0xc0 == 0x80 { // not inside a UTF-8 sequence
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// ServeWitness registers the witness protocol handler on h.
func ServeWitness(h host.Host, src WitnessSource) {
	serveOneShot(h, WitnessProtocol, witnessTimeout, maxWitnessFrame, func(b []byte, from peer.ID) any {
		req, err := decodeWitnessRequest(b)
		if err != nil {
			return witnessResponse{Err: strings.TrimPrefix(err.Error(), "p2p: ")}
		}
		wit, err := src.Witness(req.Org, req.Cap, from)
		if err != nil {
			return witnessResponse{Err: oneLine(err.Error())}
		}
		return witnessResponse{Witness: &wit}
	})
}

// RequestWitness asks machine p to witness this host's redemption of c in
// org. The witness returned is checked: it is for this host's redemption of
// c and signed by p's own key. The error wraps ErrWitnessRefused when p
// refused (its reason follows).
func RequestWitness(ctx context.Context, h host.Host, p peer.ID, org string, c ledger.Capability) (ledger.Witness, error) {
	s, r, err := request(ctx, h, p, WitnessProtocol, witnessTimeout, WitnessRequest{Org: org, Cap: c})
	if err != nil {
		return ledger.Witness{}, err
	}
	defer s.Close()
	b, err := hbReadFrame(r, maxWitnessFrame)
	if err != nil {
		_ = s.Reset()
		return ledger.Witness{}, fmt.Errorf("p2p: witness response from %s: %w", p, err)
	}
	wit, err := decodeWitnessResponse(b)
	if err != nil {
		return ledger.Witness{}, err
	}
	signer, err := wit.Check(c, h.ID().String())
	if err != nil {
		return ledger.Witness{}, fmt.Errorf("p2p: witness from %s does not hold: %w", p, err)
	}
	if signer != p.String() {
		return ledger.Witness{}, fmt.Errorf("p2p: witness from %s is signed by another machine, %s", p, signer)
	}
	return wit, nil
}
