package orgsvc

import (
	"strings"
	"testing"

	"github.com/cshare/cshare/ledger"
)

// TestParseLedgerSetting: org set's ledger.* values, and the errors that
// name the setting.
func TestParseLedgerSetting(t *testing.T) {
	for _, c := range []struct {
		k, v       string
		n, ms, ret int64
		err        string
	}{
		{"ledger.checkpoint_every", "1000", 1000, -1, -1, ""},
		{"ledger.checkpoint_every", "6h", -1, 6 * 3_600_000, -1, ""},
		{"ledger.checkpoint_every", "2d", -1, 2 * 24 * 3_600_000, -1, ""},
		{"ledger.checkpoint_every", "0", 0, -1, -1, ""},
		{"ledger.checkpoint_every", "5", -1, -1, -1, "ledger.checkpoint_every: 5 entries"},
		{"ledger.checkpoint_every", "1s", -1, -1, -1, "ledger.checkpoint_every"},
		{"ledger.checkpoint_every", "soon", -1, -1, -1, "ledger.checkpoint_every"},
		{"ledger.retain", "720h", -1, -1, 720 * 3_600_000, ""},
		{"ledger.retain", "none", -1, -1, 0, ""},
		{"ledger.retain", "5m", -1, -1, -1, "ledger.retain"},
		{"jobs.retain", "720h", -1, -1, -1, ""},
		{"jobs.retain", "5m", -1, -1, -1, "jobs.retain: \"5m\"; allowed: a time from 1h to 10 years"},
		{"jobs.retain", "11y", -1, -1, -1, "jobs.retain"},
	} {
		var u ledger.OrgUpdate
		err := parseLedgerSetting(&u, c.k, c.v)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s=%s: %v, want %q", c.k, c.v, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s=%s: %v", c.k, c.v, err)
			continue
		}
		got := func(p *int64) int64 {
			if p == nil {
				return -1
			}
			return *p
		}
		if c.k == "jobs.retain" && got(u.JobsRetainMS) != 720*3_600_000 {
			t.Errorf("%s=%s: %d", c.k, c.v, got(u.JobsRetainMS))
		}
		if got(u.LedgerCheckpointEvery) != c.n || got(u.LedgerCheckpointEveryMS) != c.ms || got(u.LedgerRetainMS) != c.ret {
			t.Errorf("%s=%s: %d %d %d", c.k, c.v, got(u.LedgerCheckpointEvery), got(u.LedgerCheckpointEveryMS), got(u.LedgerRetainMS))
		}
	}
}
