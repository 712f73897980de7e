package p2p

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// FuzzSyncFrames: any bytes read as sync frames (a request, as a server
// reads it, then responses, as a client does) and as heartbeat-protocol
// frames give values or errors, never a panic and never a frame over its
// cap.
func FuzzSyncFrames(f *testing.F) {
	for _, v := range []any{
		syncReq{Op: "get", Org: "bafyorg", Want: [][]byte{{1, 2, 3}}, Floor: 7, Limit: 10},
		syncResp{Blocks: [][]byte{[]byte("block")}, Done: true},
		hbEntry{HB: []byte("hb"), AgeMs: 5},
	} {
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		if err := writeSyncFrame(w, v); err != nil {
			f.Fatal(err)
		}
		f.Add(b.Bytes())
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req syncReq
		if err := readSyncFrameMax(bufio.NewReader(bytes.NewReader(data)), maxSyncRequest, &req); err == nil {
			_, _ = toCIDs(req.Want)
		}
		r := bufio.NewReader(bytes.NewReader(data))
		for i := 0; i < 4; i++ {
			var resp syncResp
			if readSyncFrame(r, &resp) != nil {
				break
			}
		}
		r = bufio.NewReader(bytes.NewReader(data))
		for {
			raw, err := hbReadFrame(r, MaxPayloadSize+64)
			if err != nil {
				break
			}
			if len(raw) > MaxPayloadSize+64 {
				t.Fatalf("a frame of %d bytes passed the cap", len(raw))
			}
			var e hbEntry
			_ = gossipDec.Unmarshal(raw, &e)
		}
		var hr hbRequest
		_ = cbor.Unmarshal(data, &hr)
	})
}
