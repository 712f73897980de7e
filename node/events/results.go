package events

import (
	"errors"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/cshare/cshare/ledger"
)

// resultsView is ledger.JobResults as itemHits reads it again after the
// fold: the same CBOR keys, decoded with the same rules (decode), but its
// texts are buffers the next decode reuses, not strings: a node catching
// up on a job's results allocates nothing for them (the fold has already
// made its own). TestResultsViewMirrors keeps its keys those of
// ledger.JobResults and ledger.ItemResult.
type resultsView struct {
	Job     textBuf      `cbor:"job"`
	Results []resultView `cbor:"results"`
}

type resultView struct {
	Item       int64   `cbor:"item"`
	Code       int64   `cbor:"code"`
	DurationMS int64   `cbor:"duration_ms"`
	OutputSize int64   `cbor:"output_size"`
	Instance   textBuf `cbor:"instance,omitempty"`
	Error      textBuf `cbor:"error,omitempty"`
	Started    int64   `cbor:"started,omitempty"`
	Stopped    bool    `cbor:"stopped,omitempty"`
	OOMKilled  bool    `cbor:"oom,omitempty"`
	TimedOut   bool    `cbor:"timeout,omitempty"`
}

// decode reads p, a job.results payload, into v: by scan, which reads the
// one shape signers write (a map of known keys, each once, of their own
// types) without reflection, else by ledger.DecodePayload. Both accept the
// same payloads and read the same values (FuzzResultsView).
func (v *resultsView) decode(p []byte) error {
	v.reset()
	if v.scan(p) {
		return nil
	}
	v.reset()
	return ledger.DecodePayload(p, v)
}

// scan reads p into v when p is a map of resultsView's keys, each at most
// once, of the types they decode from (text strings, integers, booleans,
// an array of maps): what ledger.DecodePayload reads the same. Anything
// else (null for a value, a key in another case, a long array,
// trailing bytes, malformed data) is false: decode's to read.
func (v *resultsView) scan(p []byte) bool {
	r := cborReader{b: p, ok: true}
	m, n := r.head()
	if m != 5 || n > 2 {
		return false
	}
	var seen uint8
	for range n {
		switch k := r.text(); {
		case !r.ok:
			return false
		case string(k) == "job" && seen&1 == 0:
			seen |= 1
			v.Job = append(v.Job[:0], r.text()...)
		case string(k) == "results" && seen&2 == 0:
			seen |= 2
			m, n := r.head()
			if m != 4 || n > maxScanResults || n > uint64(len(r.b)) { // each a byte at least
				return false
			}
			if cap(v.Results) < int(n) {
				v.Results = slices.Grow(v.Results[:0], int(n))
			}
			v.Results = v.Results[:n]
			for i := range v.Results {
				r.result(&v.Results[i])
			}
		default:
			return false
		}
	}
	return r.ok && len(r.b) == 0
}

// maxScanResults is the longest array scan reads: the decoder's limit
// (ledger's decMode: MaxArrayElements).
const maxScanResults = 65536

// result reads one result's map into x (zero but for its buffers).
func (r *cborReader) result(x *resultView) {
	m, n := r.head()
	if m != 5 || n > 10 {
		r.ok = false
	}
	var seen uint16
	for i := uint64(0); i < n && r.ok; i++ {
		k := r.text()
		var bit uint16
		switch string(k) {
		case "item":
			bit, x.Item = 1<<0, r.int()
		case "code":
			bit, x.Code = 1<<1, r.int()
		case "duration_ms":
			bit, x.DurationMS = 1<<2, r.int()
		case "output_size":
			bit, x.OutputSize = 1<<3, r.int()
		case "instance":
			bit, x.Instance = 1<<4, append(x.Instance[:0], r.text()...)
		case "error":
			bit, x.Error = 1<<5, append(x.Error[:0], r.text()...)
		case "started":
			bit, x.Started = 1<<6, r.int()
		case "stopped":
			bit, x.Stopped = 1<<7, r.bool()
		case "oom":
			bit, x.OOMKilled = 1<<8, r.bool()
		case "timeout":
			bit, x.TimedOut = 1<<9, r.bool()
		}
		if bit == 0 || seen&bit != 0 {
			r.ok = false
		}
		seen |= bit
	}
}

// cborReader reads the CBOR items scan takes; ok turns false at the first
// it cannot, and every read after that is empty.
type cborReader struct {
	b  []byte
	ok bool
}

// head reads an item's head: its major type and argument.
func (r *cborReader) head() (major byte, arg uint64) {
	if !r.ok || len(r.b) == 0 {
		r.ok = false
		return 0xff, 0
	}
	major, ai := r.b[0]>>5, r.b[0]&0x1f
	switch {
	case ai < 24:
		arg, r.b = uint64(ai), r.b[1:]
	case ai <= 27:
		n := 1 << (ai - 24)
		if len(r.b) < 1+n {
			r.ok = false
			return 0xff, 0
		}
		for _, c := range r.b[1 : 1+n] {
			arg = arg<<8 | uint64(c)
		}
		r.b = r.b[1+n:]
	default: // indefinite length, reserved
		r.ok = false
		return 0xff, 0
	}
	return major, arg
}

// text reads a text string of valid UTF-8: a view into the data.
func (r *cborReader) text() []byte {
	m, n := r.head()
	if m != 3 || n > uint64(len(r.b)) || !utf8.Valid(r.b[:n]) {
		r.ok = false
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

// int reads an integer that fits an int64.
func (r *cborReader) int() int64 {
	m, n := r.head()
	if m > 1 || n > math.MaxInt64 {
		r.ok = false
		return 0
	}
	if m == 1 {
		return -1 - int64(n)
	}
	return int64(n)
}

// bool reads false or true.
func (r *cborReader) bool() bool {
	if !r.ok || len(r.b) == 0 || r.b[0]&^1 != 0xf4 {
		r.ok = false
		return false
	}
	t := r.b[0] == 0xf5
	r.b = r.b[1:]
	return t
}

// reset empties v for the next decode, keeping its buffers.
func (v *resultsView) reset() {
	v.Job = v.Job[:0]
	all := v.Results[:cap(v.Results)]
	for i := range all {
		r := &all[i]
		*r = resultView{Instance: r.Instance[:0], Error: r.Error[:0]}
	}
	v.Results = v.Results[:0]
}

// textBuf is a CBOR text string decoded into a reused buffer. It takes what
// a Go string takes from ledger.DecodePayload (a definite-length text
// string of valid UTF-8; null and undefined as empty) and refuses the
// rest, so a payload decodes into a resultsView when, and only when, it
// decodes into a ledger.JobResults (FuzzResultsView).
type textBuf []byte

var errNotText = errors.New("not a text string")

// UnmarshalCBOR is called with one well-formed CBOR data item.
func (t *textBuf) UnmarshalCBOR(data []byte) error {
	if len(data) == 0 {
		return errNotText
	}
	if data[0] == 0xf6 || data[0] == 0xf7 { // null, undefined
		*t = (*t)[:0]
		return nil
	}
	if data[0]>>5 != 3 {
		return errNotText
	}
	head := 1
	switch ai := data[0] & 0x1f; {
	case ai < 24:
	case ai <= 27:
		head += 1 << (ai - 24)
	default: // indefinite length: ledger's decoding forbids it
		return errNotText
	}
	if head > len(data) || !utf8.Valid(data[head:]) {
		return errNotText
	}
	*t = append((*t)[:0], data[head:]...)
	return nil
}
