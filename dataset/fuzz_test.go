package dataset

import (
	"bytes"
	"testing"
)

func FuzzDecodeHaveRequest(f *testing.F) {
	c, _ := cidBuilder.Sum([]byte("x"))
	f.Add(c.Bytes())
	f.Add([]byte{})
	f.Add(append(c.Bytes(), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeHaveRequest(b)
		if err != nil {
			return
		}
		if !bytes.Equal(got.Bytes(), b) {
			t.Fatalf("decoded %s from %x, which encodes as %x", got, b, got.Bytes())
		}
	})
}

func FuzzDecodeBlocksRequest(f *testing.F) {
	c, _ := cidBuilder.Sum([]byte("x"))
	req := append([]byte{2, byte(len(c.Bytes()))}, c.Bytes()...)
	req = append(req, byte(len(c.Bytes())))
	f.Add(append(req, c.Bytes()...))
	f.Add([]byte{0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := DecodeBlocksRequest(bytes.NewReader(b))
		if err == nil && (len(cs) == 0 || len(cs) > maxBlocksPerRequest) {
			t.Fatalf("accepted %d CIDs", len(cs))
		}
	})
}
