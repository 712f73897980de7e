package p2p

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/cshare/cshare/ledger"
)

// AdmitProtocol is the stream protocol with which a joiner proves to a
// machine of the org, before it is served anything, that it holds a
// current org key or a usable invite (see gate.go for what that admits).
//
// Wire (frames as in SyncProtocol): the server sends {"nonce": 32 random
// bytes}; the client answers {"org", "cap", "sig"}, where sig is the
// client's machine-key signature, under the domain "cshare-admit-v1" and
// the org, of {"nonce", "joiner": client's peer ID, "server": server's peer
// ID, "cap"}; the server answers {"ok": true} or {"err": reason} and
// closes. The stream is already authenticated and encrypted (Noise) to
// both peer IDs; the signature binds the proof to this stream's fresh
// nonce and to both IDs as well, so a proof seen by one machine can
// neither be replayed to it later nor relayed to another machine. The
// capability itself (the org key or invite, a bearer secret) is shown only
// to the machines named in the token (the dial is authenticated to their
// peer IDs), which as machines of the org may see it.
//
// A joiner refused (bad proof, unsigned or foreign capability, a rotated
// org key, an expired or spent invite) has its connections closed; refused
// AdmitTries times within BlockFor, it is refused by the gater for
// BlockFor.
const AdmitProtocol = protocol.ID("/cshare/admit/1.0.0")

// Admission limits.
const (
	maxAdmitFrame = 4096
	admitTimeout  = 20 * time.Second
	admitNonceLen = 32
)

const admitSigDomain = "cshare-admit-v1\x00"

// AdmitSource is the node's side of AdmitProtocol.
type AdmitSource interface {
	// Admit says whether c, presented by joiner, may join org now: nil,
	// or a one-line reason that says what to do.
	Admit(org string, c ledger.Capability, joiner peer.ID) error
}

type admitChallenge struct {
	Nonce []byte `cbor:"nonce"`
}

type admitProof struct {
	Nonce  []byte            `cbor:"nonce"`
	Joiner string            `cbor:"joiner"`
	Server string            `cbor:"server"`
	Cap    ledger.Capability `cbor:"cap"`
}

type admitRequest struct {
	Org string            `cbor:"org"`
	Cap ledger.Capability `cbor:"cap"`
	Sig []byte            `cbor:"sig"`
}

type admitResponse struct {
	OK  bool   `cbor:"ok,omitempty"`
	Err string `cbor:"err,omitempty"`
}

// ErrAdmitRefused says the machine asked refused to admit this joiner; the
// error's text after it is the machine's one-line reason.
var ErrAdmitRefused = errors.New("p2p: admission refused")

// decodeAdmitRequest reads and checks a request frame's contents (the
// capability's signature and authority are the source's questions).
func decodeAdmitRequest(b []byte) (admitRequest, error) {
	var req admitRequest
	if len(b) > maxAdmitFrame {
		return req, fmt.Errorf("%w: admission request of %d bytes", ErrTooLarge, len(b))
	}
	if err := syncDec.Unmarshal(b, &req); err != nil {
		return req, fmt.Errorf("p2p: admission request: %w", err)
	}
	if err := checkOrgID(req.Org); err != nil {
		return req, fmt.Errorf("p2p: admission request: %w", err)
	}
	switch c := req.Cap; {
	case c.Org != req.Org:
		return req, errors.New("p2p: admission request: the capability is for another org")
	case c.Kind != ledger.CapOrgKey && c.Kind != ledger.CapInvite:
		return req, errors.New("p2p: admission request: capability kind must be orgkey or invite")
	case len(c.Issuer) == 0 || len(c.Sig) == 0:
		return req, errors.New("p2p: admission request: the capability is unsigned")
	case len(req.Sig) == 0:
		return req, errors.New("p2p: admission request: sig is required")
	}
	return req, nil
}

// ServeAdmit registers the admission protocol handler on h.
func (h *Host) ServeAdmit(src AdmitSource) {
	h.h.SetStreamHandler(AdmitProtocol, func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(admitTimeout))
		from := s.Conn().RemotePeer()
		r, w := bufio.NewReader(s), bufio.NewWriter(s)
		nonce := make([]byte, admitNonceLen)
		_, _ = rand.Read(nonce)
		if err := writeSyncFrame(w, admitChallenge{Nonce: nonce}); err != nil {
			_ = s.Reset()
			return
		}
		b, err := hbReadFrame(r, maxAdmitFrame)
		if err != nil {
			_ = s.Reset()
			return
		}
		refuse := func(why string) {
			at := time.Now()
			h.refused.WithLabelValues("admission").Inc()
			h.log.Info("refused a joiner", "peer", from, "why", why)
			_ = writeSyncFrame(w, admitResponse{Err: oneLine(why)})
			// Let the refusal reach the joiner (it closes its side once it
			// has read it), then cut it off.
			_ = s.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, _ = io.Copy(io.Discard, io.LimitReader(s, maxAdmitFrame))
			h.gate.refusedAdmission(from, at)
		}
		req, err := decodeAdmitRequest(b)
		if err != nil {
			refuse(strings.TrimPrefix(err.Error(), "p2p: "))
			return
		}
		proof := admitProof{Nonce: nonce, Joiner: from.String(), Server: h.ID().String(), Cap: req.Cap}
		sb, err := signedBytes(admitSigDomain, req.Org, &proof)
		pk := s.Conn().RemotePublicKey()
		if err != nil || pk == nil {
			refuse("admission proof cannot be checked")
			return
		}
		if ok, err := pk.Verify(sb, req.Sig); err != nil || !ok {
			refuse("the admission proof's signature does not verify")
			return
		}
		if err := src.Admit(req.Org, req.Cap, from); err != nil {
			refuse(err.Error())
			return
		}
		h.gate.admitted(from)
		h.log.Info("admitted a joiner", "peer", from, "kind", req.Cap.Kind, "cap", req.Cap.ID)
		_ = writeSyncFrame(w, admitResponse{OK: true})
	})
}

// Admit proves to machine p that this host holds c, to join org. The
// error wraps ErrAdmitRefused when p refused (its reason follows).
func (h *Host) Admit(ctx context.Context, p peer.ID, org string, c ledger.Capability) error {
	s, err := h.h.NewStream(network.WithAllowLimitedConn(ctx, string(AdmitProtocol)), p, AdmitProtocol)
	if err != nil {
		return fmt.Errorf("p2p: open %s stream to %s: %w", AdmitProtocol, p, err)
	}
	defer s.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	} else {
		_ = s.SetDeadline(time.Now().Add(admitTimeout))
	}
	r, w := bufio.NewReader(s), bufio.NewWriter(s)
	b, err := hbReadFrame(r, maxAdmitFrame)
	if err != nil {
		_ = s.Reset()
		return fmt.Errorf("p2p: admission challenge from %s: %w", p, err)
	}
	var ch admitChallenge
	if err := syncDec.Unmarshal(b, &ch); err != nil || len(ch.Nonce) != admitNonceLen {
		_ = s.Reset()
		return fmt.Errorf("p2p: admission challenge from %s is malformed", p)
	}
	proof := admitProof{Nonce: ch.Nonce, Joiner: h.ID().String(), Server: p.String(), Cap: c}
	sb, err := signedBytes(admitSigDomain, org, &proof)
	if err != nil {
		return err
	}
	sig, err := h.key.Sign(sb)
	if err != nil {
		return err
	}
	if err := writeSyncFrame(w, admitRequest{Org: org, Cap: c, Sig: sig}); err != nil {
		_ = s.Reset()
		return fmt.Errorf("p2p: admission request to %s: %w", p, err)
	}
	b, err = hbReadFrame(r, maxAdmitFrame)
	if err != nil {
		_ = s.Reset()
		return fmt.Errorf("p2p: admission answer from %s: %w", p, err)
	}
	var resp admitResponse
	if err := syncDec.Unmarshal(b, &resp); err != nil {
		return fmt.Errorf("p2p: admission answer from %s: %w", p, err)
	}
	switch {
	case resp.Err != "":
		return fmt.Errorf("%w: %s", ErrAdmitRefused, oneLine(resp.Err))
	case !resp.OK:
		return fmt.Errorf("p2p: admission answer from %s says neither yes nor no", p)
	}
	return nil
}
