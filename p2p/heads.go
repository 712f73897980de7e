package p2p

import (
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/cshare/cshare/internal/edkey"
)

// ErrBadHeads says a ledger-topic message is malformed or badly signed.
var ErrBadHeads = errors.New("p2p: bad heads announcement")

// EncodeHeads builds a ledger-topic message: payload (a heads announcement
// of the sync layer) with the sender's sequence number seq, signed by key
// for org. PublishHeads sends what it returns; the simulation (sim/) too.
func EncodeHeads(org string, key crypto.PrivKey, seq uint64, payload []byte) ([]byte, error) {
	if len(payload) > MaxPayloadSize {
		return nil, fmt.Errorf("%w: heads payload is %d bytes, limit %d", ErrTooLarge, len(payload), MaxPayloadSize)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, err
	}
	hm := headsMsg{Seq: seq, Payload: payload, From: id.String()}
	sb, err := hm.signingBytes(org)
	if err != nil {
		return nil, err
	}
	if hm.Sig, err = key.Sign(sb); err != nil {
		return nil, err
	}
	return gossipEnc.Marshal(&hm)
}

// decodeHeads decodes a ledger-topic message and its sender's key, without
// checking the signature; reason is the rejection reason when it fails.
func decodeHeads(data []byte) (hm headsMsg, key *edkey.Key, reason string) {
	if len(data) > MaxPayloadSize+256 {
		return hm, nil, ReasonTooLarge
	}
	if err := gossipDec.Unmarshal(data, &hm); err != nil || hm.Seq == 0 {
		return hm, nil, ReasonUndecodable
	}
	if len(hm.Payload) > MaxPayloadSize {
		return hm, nil, ReasonTooLarge
	}
	key, err := edkey.OfID(hm.From)
	if err != nil {
		return hm, nil, ReasonUndecodable
	}
	return hm, key, ""
}

// DecodeVerifyHeads decodes a ledger-topic message and checks its signature
// for org: what the topic's validator checks of a message alone, before it
// asks who the sender is and whether the sequence is new.
func DecodeVerifyHeads(org string, data []byte) (from peer.ID, seq uint64, payload []byte, err error) {
	hm, key, reason := decodeHeads(data)
	if reason != "" {
		return "", 0, nil, fmt.Errorf("%w: %s", ErrBadHeads, reason)
	}
	if len(hm.Sig) == 0 {
		return "", 0, nil, fmt.Errorf("%w: %s", ErrBadHeads, ReasonUnsigned)
	}
	sb, err := hm.signingBytes(org)
	if err != nil || !key.Verify(sb, hm.Sig) {
		return "", 0, nil, fmt.Errorf("%w: %s", ErrBadHeads, ReasonBadSignature)
	}
	return key.ID, hm.Seq, hm.Payload, nil
}
