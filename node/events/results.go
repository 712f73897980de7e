package events

import (
	"errors"
	"unicode/utf8"
)

// resultsView is ledger.JobResults as itemHits reads it again after the
// fold: the same CBOR keys, decoded by ledger.DecodePayload with the same
// rules, but its texts are views into buffers the next decode reuses, not
// strings: a node catching up on a job's results allocates nothing for
// them (the fold has already made its own). TestResultsViewMirrors keeps
// its keys those of ledger.JobResults and ledger.ItemResult.
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
