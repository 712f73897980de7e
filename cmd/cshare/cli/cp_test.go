package cli

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestCopyArgs: exactly one side of a copy is ID:PATH; a local path may
// hold a colon after a slash.
func TestCopyArgs(t *testing.T) {
	cmd := &cobra.Command{Use: "cp"}
	for _, tc := range []struct {
		src, dst, ref, path, local string
		in, bad                    bool
	}{
		{"./data", "c0123:/root", "c0123", "/root", "./data", true, false},
		{"c0123:/root/out", "out", "c0123", "/root/out", "out", false, false},
		{"./a:b", "c1:/x", "c1", "/x", "./a:b", true, false},
		{"a", "b", "", "", "", false, true},
		{"c1:/a", "c2:/b", "", "", "", false, true},
		{"c1:", "x", "", "", "", false, true},
	} {
		tg, local, in, err := copyArgs(cmd, []string{tc.src, tc.dst})
		if tc.bad {
			if err == nil {
				t.Errorf("%s %s: accepted", tc.src, tc.dst)
			}
			continue
		}
		if err != nil || tg.Ref != tc.ref || tg.Path != tc.path || local != tc.local || in != tc.in {
			t.Errorf("%s %s: %+v %q %v %v", tc.src, tc.dst, tg, local, in, err)
		}
	}
}
