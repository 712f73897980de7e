package store

import (
	"bytes"
	"testing"
)

// TestAdvance: after a short writev the buffers left start at the first
// byte not written, with none empty.
func TestAdvance(t *testing.T) {
	bufs := func() [][]byte { return [][]byte{[]byte("abc"), []byte("de"), []byte("fgh")} }
	for _, tc := range []struct {
		n    int
		want string
		left int
	}{{0, "abcdefgh", 3}, {1, "bcdefgh", 3}, {3, "defgh", 2}, {4, "efgh", 2}, {5, "fgh", 1}, {7, "h", 1}, {8, "", 0}} {
		got := advance(bufs(), tc.n)
		if s := string(bytes.Join(got, nil)); s != tc.want || len(got) != tc.left {
			t.Errorf("advance(%d) = %q in %d buffers, want %q in %d", tc.n, s, len(got), tc.want, tc.left)
		}
	}
}
