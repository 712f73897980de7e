package replica

import (
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"
	"github.com/ipfs/go-cid"

	"github.com/cshare/cshare/ledger"
)

// HeadsPayload is the payload of a heads announcement as Announce publishes
// it: the heads, the largest clock among them, and e's bytes when e is not
// nil and small enough to push (at most 16 KiB).
func HeadsPayload(heads []cid.Cid, clock uint64, e *ledger.Entry) ([]byte, error) {
	msg := headsMsg{Clock: clock}
	for _, h := range heads {
		msg.Heads = append(msg.Heads, h.Bytes())
	}
	if e != nil && len(e.Bytes()) <= maxPushedEntry {
		msg.Entries = [][]byte{e.Bytes()}
	}
	return cbor.Marshal(msg)
}

// errBadHeadsPayload says a heads announcement's payload is not one.
var errBadHeadsPayload = errors.New("replica: bad heads announcement")

// ParseHeadsPayload decodes a heads announcement's payload within OnHeads's
// limits (4096 heads, 4 pushed entries): the heads it names and the bytes of
// the entries it pushes, still to be decoded and verified.
func ParseHeadsPayload(payload []byte) (heads []cid.Cid, pushed [][]byte, err error) {
	var msg headsMsg
	if err := cbor.Unmarshal(payload, &msg); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errBadHeadsPayload, err)
	}
	if len(msg.Heads) > 4096 || len(msg.Entries) > 4 {
		return nil, nil, fmt.Errorf("%w: %d heads and %d entries; allowed: 4096 and 4", errBadHeadsPayload, len(msg.Heads), len(msg.Entries))
	}
	heads = make([]cid.Cid, 0, len(msg.Heads))
	for _, b := range msg.Heads {
		c, err := cid.Cast(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: head: %v", errBadHeadsPayload, err)
		}
		heads = append(heads, c)
	}
	return heads, msg.Entries, nil
}
