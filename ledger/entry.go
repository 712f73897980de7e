package ledger

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	mh "github.com/multiformats/go-multihash"

	"github.com/cshare/cshare/internal/edkey"
)

// Size caps. An entry larger than MaxEntrySize is refused at the door.
const (
	MaxEntrySize   = 64 << 10
	MaxPayloadSize = 60 << 10
	MaxParents     = 64
	maxKindLen     = 32
	sigDomain      = "cshare-entry-v1\x00"
	codecCBOR      = 0x51 // multicodec "cbor"
)

// Sentinel errors callers branch on.
var (
	ErrTooLarge     = errors.New("ledger: entry too large")
	ErrMalformed    = errors.New("ledger: malformed entry")
	ErrBadSignature = errors.New("ledger: bad signature")
	ErrCIDMismatch  = errors.New("ledger: block does not match its CID")
	ErrNotAuthority = errors.New("ledger: not authorised")
	ErrWrongOrg     = errors.New("ledger: entry belongs to another org")
	ErrDeleted      = errors.New("ledger: the org was deleted")
)

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	encMode, err = cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:   16,
		MaxArrayElements:  65536,
		MaxMapPairs:       4096,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
	}.DecMode()
	if err != nil {
		panic(err)
	}
}

// wire is the canonical encoding of an entry: a CBOR map with small integer
// keys, encoded with RFC 8949 core deterministic rules.
type wire struct {
	Org     string          `cbor:"1,keyasint,omitempty"`
	Kind    string          `cbor:"2,keyasint"`
	Payload cbor.RawMessage `cbor:"3,keyasint"`
	Author  []byte          `cbor:"4,keyasint"`
	Parents [][]byte        `cbor:"5,keyasint,omitempty"`
	Clock   uint64          `cbor:"6,keyasint"`
	Time    int64           `cbor:"7,keyasint"`
	Sig     []byte          `cbor:"8,keyasint,omitempty"`
}

// Entry is one signed, CID-addressed ledger entry. Entries are immutable once
// built: construct them with Sign or Decode.
type Entry struct {
	Org     string    // org ID (the genesis CID); empty for the genesis entry
	Kind    string    // e.g. "machine.approve"
	Payload []byte    // canonical CBOR of the kind's payload
	Author  []byte    // Ed25519 public key, 32 bytes
	Parents []cid.Cid // the heads the author saw, sorted, unique
	Clock   uint64    // 1 + max parent clock; 1 for genesis (the entry's level)
	Time    int64     // advisory wall time, Unix milliseconds
	Sig     []byte

	raw      []byte
	cid      cid.Cid
	key      OrderKey
	authorID peer.ID
	author   string     // authorID.String(), cached: the fold uses it for every entry
	ak       *edkey.Key // shared by every entry of the author
	stub     bool       // a pruned entry's CID, clock and org only (PrunedStub)
}

// CID is the entry's content address.
func (e *Entry) CID() cid.Cid { return e.cid }

// Bytes is the entry's canonical encoding (what its CID addresses).
func (e *Entry) Bytes() []byte { return e.raw }

// AuthorID is the peer ID of the entry's author: a machine and member ID.
func (e *Entry) AuthorID() peer.ID { return e.authorID }

// AuthorString is the author's peer ID as a string, the form State uses for
// member and machine IDs.
func (e *Entry) AuthorString() string { return e.author }

// Key is the entry's position key in the total order: (clock, CID bytes).
func (e *Entry) Key() OrderKey { return e.key }

// OrderKey orders entries: by clock (which is the entry's level in the DAG,
// so parents always sort first), then by CID bytes.
type OrderKey struct {
	Clock uint64
	CID   string
}

// Less reports whether k sorts before o.
func (k OrderKey) Less(o OrderKey) bool {
	if k.Clock != o.Clock {
		return k.Clock < o.Clock
	}
	return k.CID < o.CID
}

// Signer signs entries with an Ed25519 key.
type Signer struct {
	priv ed25519.PrivateKey
	pub  []byte
	id   peer.ID
}

// NewSigner wraps a libp2p Ed25519 private key.
func NewSigner(k crypto.PrivKey) (*Signer, error) {
	raw, err := k.Raw()
	if err != nil {
		return nil, err
	}
	if k.Type() != crypto.Ed25519 || len(raw) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("ledger: signer key must be Ed25519")
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		return nil, err
	}
	priv := ed25519.PrivateKey(raw)
	return &Signer{priv: priv, pub: []byte(priv.Public().(ed25519.PublicKey)), id: id}, nil
}

// ID is the signer's peer ID.
func (s *Signer) ID() peer.ID { return s.id }

// PublicKey is the signer's raw Ed25519 public key.
func (s *Signer) PublicKey() []byte { return s.pub }

// SignBytes signs an arbitrary domain-separated message (used for capabilities).
func (s *Signer) SignBytes(domain string, msg []byte) []byte {
	return ed25519.Sign(s.priv, append([]byte(domain), msg...))
}

// EncodePayload encodes a payload value canonically.
func EncodePayload(v any) ([]byte, error) { return encMode.Marshal(v) }

// DecodePayload decodes a canonical payload strictly (unknown fields refused).
func DecodePayload(data []byte, v any) error {
	if err := decMode.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: payload: %v", ErrMalformed, err)
	}
	return nil
}

// Sign builds and signs a new entry. parents are the heads the author saw and
// parentClock is the largest clock among them (0 for the genesis entry).
func (s *Signer) Sign(org, kind string, payload any, parents []cid.Cid, parentClock uint64, nowMillis int64) (*Entry, error) {
	p, err := EncodePayload(payload)
	if err != nil {
		return nil, fmt.Errorf("ledger: encode %s payload: %w", kind, err)
	}
	ps := append([]cid.Cid(nil), parents...)
	sortCIDs(ps)
	w := wire{Org: org, Kind: kind, Payload: p, Author: s.pub, Clock: parentClock + 1, Time: nowMillis}
	for i, c := range ps {
		if i > 0 && ps[i-1].Equals(c) {
			continue
		}
		w.Parents = append(w.Parents, c.Bytes())
	}
	unsigned, err := encMode.Marshal(w)
	if err != nil {
		return nil, err
	}
	w.Sig = ed25519.Sign(s.priv, append([]byte(sigDomain), unsigned...))
	raw, err := encMode.Marshal(w)
	if err != nil {
		return nil, err
	}
	if len(raw) > MaxEntrySize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(raw), MaxEntrySize)
	}
	return decodeChecked(raw, w, false)
}

func sortCIDs(cs []cid.Cid) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].KeyString() < cs[j].KeyString() })
}

// CIDOf computes the CIDv1 (codec cbor, sha2-256) of raw bytes.
func CIDOf(raw []byte) cid.Cid {
	sum := sha256.Sum256(raw)
	h, _ := mh.Encode(sum[:], mh.SHA2_256)
	return cid.NewCidV1(codecCBOR, h)
}

// Decode parses an entry from untrusted bytes and verifies its canonical
// form, size caps and signature. It does not check authority (that depends on
// the State the entry is applied to) or that its parents exist. raw is copied.
func Decode(raw []byte) (*Entry, error) {
	e, err := decodeUnverified(raw)
	if err != nil {
		return nil, err
	}
	if err := e.verifySig(); err != nil {
		return nil, err
	}
	return e, nil
}

// DecodeWithCID is Decode plus a check that the bytes hash to want. The hash is
// checked first, so a block that does not match its CID costs no signature check.
func DecodeWithCID(want cid.Cid, raw []byte) (*Entry, error) {
	if len(raw) <= MaxEntrySize && want.Defined() {
		if got, err := want.Prefix().Sum(raw); err != nil || !got.Equals(want) {
			return nil, fmt.Errorf("%w: want %s", ErrCIDMismatch, want)
		}
	}
	e, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	if !e.cid.Equals(want) {
		return nil, fmt.Errorf("%w: want %s, got %s", ErrCIDMismatch, want, e.cid)
	}
	return e, nil
}

func decodeUnverified(raw []byte) (*Entry, error) {
	if len(raw) > MaxEntrySize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(raw), MaxEntrySize)
	}
	own := append([]byte(nil), raw...) // the entry keeps its bytes; fields point into them
	w, err := parseWire(own)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return decodeChecked(own, w, true)
}

// batchMax is the most signatures checked in one batch: the gain per
// signature flattens out near a thousand, and a batch holds about 450 bytes
// per signature while it is built.
const batchMax = 1024

// batchMin: fewer entries than this are checked one by one, which costs
// less than a batch of so few (a heads announcement pushes one).
const batchMin = 4

// DecodeBatch is Decode for entries that arrive together (a sync answer, a
// catch-up, the entries after a checkpoint): it checks their signatures in
// batches (edkey.Batch), which for a thousand entries costs about a third
// of checking them one by one. out[i] is raws[i]'s entry, or nil with
// errs[i] the error Decode gives for it. Both slices have len(raws).
func DecodeBatch(raws [][]byte) (out []*Entry, errs []error) {
	return decodeBatch(raws, nil)
}

// DecodeBatchWithCID is DecodeBatch with DecodeWithCID's check that
// raws[i] hashes to want[i]; a block that does not costs no signature check.
// want must have len(raws).
func DecodeBatchWithCID(want []cid.Cid, raws [][]byte) (out []*Entry, errs []error) {
	if len(want) != len(raws) {
		panic("ledger: DecodeBatchWithCID: want and raws differ in length")
	}
	return decodeBatch(raws, want)
}

func decodeBatch(raws [][]byte, want []cid.Cid) ([]*Entry, []error) {
	out, errs := make([]*Entry, len(raws)), make([]error, len(raws))
	if len(raws) == 0 {
		return out, errs
	}
	if len(raws) < batchMin {
		for i, raw := range raws {
			out[i], errs[i] = Decode(raw)
			if errs[i] == nil && want != nil && !out[i].cid.Equals(want[i]) {
				out[i], errs[i] = nil, fmt.Errorf("%w: want %s, got %s", ErrCIDMismatch, want[i], out[i].cid)
			}
		}
		return out, errs
	}
	b := edkey.NewBatch(min(len(raws), batchMax))
	var msg []byte // the signed bytes of one entry at a time: Add hashes them at once
	for lo := 0; lo < len(raws); lo += batchMax {
		hi := min(lo+batchMax, len(raws))
		b.Reset()
		for i := lo; i < hi; i++ {
			e, err := decodeUnverified(raws[i])
			if err == nil && want != nil && !e.cid.Equals(want[i]) {
				err = fmt.Errorf("%w: want %s, got %s", ErrCIDMismatch, want[i], e.cid)
			}
			if err == nil {
				msg, err = e.appendSignedBytes(msg[:0])
			}
			if err != nil {
				errs[i] = err
				continue
			}
			b.Add(e.ak, msg, e.Sig)
			out[i] = e
		}
		if b.Verify() {
			continue
		}
		// Some signature is bad (or a batch's random weights were unlucky):
		// find which, one by one, by the same rule.
		for i := lo; i < hi; i++ {
			if out[i] == nil {
				continue
			}
			if err := out[i].verifySig(); err != nil {
				out[i], errs[i] = nil, err
			}
		}
	}
	return out, errs
}

// parseWire parses an entry's envelope from its canonical encoding, without
// reflection or re-encoding. It accepts exactly the bytes that the wire type
// decodes from and re-encodes to unchanged (FuzzDecodeEntry checks this
// against the reflective decoder): one canonical CBOR map, integer keys 1..8
// with their types, the non-omitempty fields present and the omitempty ones
// present only when not empty. Byte fields point into raw.
func parseWire(raw []byte) (wire, error) {
	var w wire
	if err := checkCanonical(raw); err != nil {
		return w, err
	}
	major, n, hl, _ := canonHead(raw)
	if major != 5 {
		return w, errors.New("entry is not a map")
	}
	b := raw[hl:]
	var seen uint
	for i := uint64(0); i < n; i++ {
		km, key, kl, _ := canonHead(b)
		if km != 0 || key < 1 || key > 8 {
			return w, fmt.Errorf("unknown field (key head %#x)", b[0])
		}
		b = b[kl:]
		seen |= 1 << key // keys are strictly increasing: checkCanonical
		rest, _ := canonItem(b, 1)
		item := b[:len(b)-len(rest)]
		b = rest
		vm, arg, vl, _ := canonHead(item)
		body := item[vl:]
		switch key {
		case 1, 2: // org, kind: text
			if vm != 3 {
				return w, fmt.Errorf("field %d is not text", key)
			}
			if key == 1 {
				w.Org = string(body)
			} else {
				w.Kind = string(body)
			}
		case 3: // payload: any item
			w.Payload = item
		case 4, 8: // author, signature: bytes
			if vm != 2 {
				return w, fmt.Errorf("field %d is not bytes", key)
			}
			if key == 4 {
				w.Author = body
			} else {
				w.Sig = body
			}
		case 5: // parents: array of bytes
			if vm != 4 {
				return w, errors.New("parents is not an array")
			}
			w.Parents = make([][]byte, 0, arg)
			for j := uint64(0); j < arg; j++ {
				pm, plen, pl, _ := canonHead(body)
				if pm != 2 {
					return w, errors.New("a parent is not bytes")
				}
				w.Parents = append(w.Parents, body[pl:pl+int(plen)])
				body = body[pl+int(plen):]
			}
		case 6: // clock: unsigned
			if vm != 0 {
				return w, errors.New("clock is not an unsigned integer")
			}
			w.Clock = arg
		case 7: // time: int64
			if (vm != 0 && vm != 1) || arg > math.MaxInt64 {
				return w, errors.New("time is not an int64")
			}
			w.Time = int64(arg)
			if vm == 1 {
				w.Time = -1 - int64(arg)
			}
		}
	}
	const required = 1<<2 | 1<<3 | 1<<4 | 1<<6 | 1<<7
	switch {
	case seen&required != required:
		return w, errors.New("a required field is missing")
	case seen&(1<<1) != 0 && w.Org == "",
		seen&(1<<5) != 0 && len(w.Parents) == 0,
		seen&(1<<8) != 0 && len(w.Sig) == 0:
		return w, errors.New("an empty field is present") // its encoding omits it
	}
	return w, nil
}

// decodeWireReflect is the reference for parseWire: decode with the CBOR
// library, then require that re-encoding gives the same bytes.
func decodeWireReflect(raw []byte) (wire, error) {
	var w wire
	if err := decMode.Unmarshal(raw, &w); err != nil {
		return w, err
	}
	again, err := encMode.Marshal(w)
	if err != nil || !bytes.Equal(again, raw) {
		return w, errors.New("not in canonical encoding")
	}
	return w, nil
}

// decodeChecked checks the fields of a decoded wire value and builds the
// entry; raw is its canonical encoding and is kept as is. rawChecked says
// checkCanonical(raw) passed (parseWire), which covers the payload inside.
func decodeChecked(raw []byte, w wire, rawChecked bool) (*Entry, error) {
	switch {
	case len(w.Author) != ed25519.PublicKeySize:
		return nil, fmt.Errorf("%w: author key is %d bytes, want %d", ErrMalformed, len(w.Author), ed25519.PublicKeySize)
	case len(w.Sig) != ed25519.SignatureSize:
		return nil, fmt.Errorf("%w: signature is %d bytes, want %d", ErrMalformed, len(w.Sig), ed25519.SignatureSize)
	case w.Kind == "" || len(w.Kind) > maxKindLen:
		return nil, fmt.Errorf("%w: kind %q", ErrMalformed, w.Kind)
	case len(w.Payload) > MaxPayloadSize:
		return nil, fmt.Errorf("%w: payload %d bytes", ErrTooLarge, len(w.Payload))
	case len(w.Parents) > MaxParents:
		return nil, fmt.Errorf("%w: %d parents, limit %d", ErrMalformed, len(w.Parents), MaxParents)
	case w.Clock == 0 || w.Clock > MaxClock:
		return nil, fmt.Errorf("%w: clock %d outside 1..%d", ErrMalformed, w.Clock, uint64(MaxClock))
	case (w.Kind == KindGenesis) != (w.Org == ""):
		return nil, fmt.Errorf("%w: only the genesis entry has no org", ErrMalformed)
	case w.Kind == KindGenesis && (len(w.Parents) != 0 || w.Clock != 1):
		return nil, fmt.Errorf("%w: genesis has parents or clock != 1", ErrMalformed)
	case w.Kind != KindGenesis && len(w.Parents) == 0:
		return nil, fmt.Errorf("%w: non-genesis entry without parents", ErrMalformed)
	}
	if !rawChecked {
		if err := checkCanonical(w.Payload); err != nil {
			return nil, fmt.Errorf("%w: payload: %v", ErrMalformed, err)
		}
	}
	if len(w.Payload) == 0 || w.Payload[0]>>5 != 5 {
		return nil, fmt.Errorf("%w: payload is not a map", ErrMalformed)
	}
	e := &Entry{Org: w.Org, Kind: w.Kind, Payload: w.Payload, Author: w.Author, Clock: w.Clock, Time: w.Time, Sig: w.Sig, raw: raw}
	if len(w.Parents) > 0 {
		e.Parents = make([]cid.Cid, 0, len(w.Parents))
	}
	var prev []byte
	for _, pb := range w.Parents {
		if prev != nil && bytes.Compare(prev, pb) >= 0 {
			return nil, fmt.Errorf("%w: parents not sorted and unique", ErrMalformed)
		}
		prev = pb
		c, err := cid.Cast(pb)
		if err != nil {
			return nil, fmt.Errorf("%w: parent: %v", ErrMalformed, err)
		}
		e.Parents = append(e.Parents, c)
	}
	ak, err := edkey.Of(w.Author)
	if err != nil {
		return nil, fmt.Errorf("%w: author: %v", ErrMalformed, err)
	}
	e.ak, e.authorID, e.author = ak, ak.ID, ak.S
	e.cid = CIDOf(raw)
	e.key = OrderKey{Clock: e.Clock, CID: e.cid.KeyString()}
	return e, nil
}

// MaxClock bounds an entry's clock, far above any real ledger, so clock
// arithmetic cannot overflow.
const MaxClock = 1 << 53

// encodeWire re-encodes the entry's fields (with or without the signature).
func (e *Entry) encodeWire(withSig bool) ([]byte, error) {
	w := wire{Org: e.Org, Kind: e.Kind, Payload: e.Payload, Author: e.Author, Clock: e.Clock, Time: e.Time}
	for _, p := range e.Parents {
		w.Parents = append(w.Parents, p.Bytes())
	}
	if withSig {
		w.Sig = e.Sig
	}
	return encMode.Marshal(w)
}

// sigTrailer is how the canonical encoding of an entry ends: key 8 and a
// 64-byte byte string header, then the signature.
var sigTrailer = []byte{0x08, 0x58, 0x40}

// appendSignedBytes appends the message the signature covers to dst: the
// domain, then the canonical encoding of the entry without its signature.
// Since the signature is the last map key, that encoding is the entry's own
// bytes with the map header one smaller and the signature field cut off; no
// re-encoding needed.
func (e *Entry) appendSignedBytes(dst []byte) ([]byte, error) {
	r := e.raw
	n := len(r) - len(sigTrailer) - ed25519.SignatureSize
	if n < 1 || r[0] < 0xa2 || r[0] > 0xb7 || !bytes.Equal(r[n:n+len(sigTrailer)], sigTrailer) {
		b, err := e.encodeWire(false)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		return append(append(dst, sigDomain...), b...), nil
	}
	dst = append(dst, sigDomain...)
	dst = append(dst, r[0]-1)
	return append(dst, r[1:n]...), nil
}

// verifySig checks the entry's signature by the ledger's rule: Ed25519's
// cofactored equation (edkey.VerifyCofactored), the one a batch can check,
// so that DecodeBatch and Decode accept the same entries.
func (e *Entry) verifySig() error {
	msg, err := e.appendSignedBytes(make([]byte, 0, len(sigDomain)+len(e.raw)))
	if err != nil {
		return err
	}
	if !e.ak.VerifyCofactored(msg, e.Sig) {
		return ErrBadSignature
	}
	return nil
}

// VerifyDetached checks a domain-separated signature made with SignBytes.
func VerifyDetached(pub []byte, domain string, msg, sig []byte) bool {
	if len(pub) != ed25519.PublicKeySize || len(sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(ed25519.PublicKey(pub), append([]byte(domain), msg...), sig)
}
