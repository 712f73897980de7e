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
