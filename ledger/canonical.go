package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"
)

// checkCanonical reports whether b is exactly one CBOR data item in the
// ledger's canonical form: RFC 8949 core deterministic encoding (shortest
// heads, definite lengths, map keys in bytewise order, no duplicates),
// restricted to what payloads use: integers, byte and UTF-8 text strings,
// arrays, maps, false, true and null. No tags, no floats, no other simple
// values. A payload has one encoding, so an entry has one CID per meaning.
func checkCanonical(b []byte) error {
	rest, err := canonItem(b, 0)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return errors.New("cbor: trailing bytes")
	}
	return nil
}

// Limits, as the CBOR decoder's (decMode): nesting, array and map sizes.
const (
	maxCanonDepth    = 16
	maxCanonArray    = 65536
	maxCanonMapPairs = 4096
)

var errTruncated = errors.New("cbor: truncated")

// canonHead parses an item's head: major type, argument, head length.
func canonHead(b []byte) (major byte, arg uint64, n int, err error) {
	if len(b) == 0 {
		return 0, 0, 0, errTruncated
	}
	major, ai := b[0]>>5, b[0]&0x1f
	switch {
	case ai < 24:
		return major, uint64(ai), 1, nil
	case ai <= 27:
		n = 1 << (ai - 24) // 1, 2, 4 or 8 bytes
		if len(b) < 1+n {
			return 0, 0, 0, errTruncated
		}
		for _, c := range b[1 : 1+n] {
			arg = arg<<8 | uint64(c)
		}
		// Shortest form: the argument needs all n bytes.
		if min := [...]uint64{24, 1 << 8, 1 << 16, 1 << 32}[ai-24]; arg < min {
			return 0, 0, 0, fmt.Errorf("cbor: non-minimal head %#x", b[0])
		}
		return major, arg, 1 + n, nil
	}
	return 0, 0, 0, fmt.Errorf("cbor: indefinite length or reserved head %#x", b[0])
}

// canonItem checks one item; depth is the number of arrays and maps around it.
func canonItem(b []byte, depth int) ([]byte, error) {
	major, arg, n, err := canonHead(b)
	if err != nil {
		return nil, err
	}
	if (major == 4 || major == 5) && depth >= maxCanonDepth {
		return nil, errors.New("cbor: nested too deep")
	}
	if major == 7 {
		if n != 1 || arg < 20 || arg > 22 {
			return nil, fmt.Errorf("cbor: simple value or float %#x", b[0])
		}
		return b[1:], nil
	}
	b = b[n:]
	switch major {
	case 0, 1: // integers
		return b, nil
	case 2, 3: // byte and text strings
		if arg > uint64(len(b)) {
			return nil, errTruncated
		}
		if major == 3 && !utf8.Valid(b[:arg]) {
			return nil, errors.New("cbor: text string is not UTF-8")
		}
		return b[arg:], nil
	case 4: // array
		if arg > maxCanonArray {
			return nil, errors.New("cbor: array too long")
		}
		if arg > uint64(len(b)) { // every item takes a byte at least
			return nil, errTruncated
		}
		for i := uint64(0); i < arg; i++ {
			if b, err = canonItem(b, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	case 5: // map
		if arg > maxCanonMapPairs {
			return nil, errors.New("cbor: map too large")
		}
		if arg > uint64(len(b))/2 {
			return nil, errTruncated
		}
		var prev []byte
		for i := uint64(0); i < arg; i++ {
			rest, err := canonItem(b, depth+1)
			if err != nil {
				return nil, err
			}
			key := b[:len(b)-len(rest)]
			if prev != nil && bytes.Compare(prev, key) >= 0 {
				return nil, errors.New("cbor: map keys not in canonical order, or duplicated")
			}
			prev = key
			if b, err = canonItem(rest, depth+1); err != nil {
				return nil, err
			}
		}
		return b, nil
	}
	return nil, fmt.Errorf("cbor: tag %d", arg) // major 6
}
