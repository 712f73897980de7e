package orgsvc

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// parseLedgerSetting reads org set's ledger.checkpoint_every (a count of
// entries, or a time like 1h or 2d), ledger.retain and jobs.retain (a
// time; 0 keeps everything) into u; the fold checks the bounds again.
func parseLedgerSetting(u *ledger.OrgUpdate, k, v string) error {
	v = strings.TrimSpace(v)
	switch k {
	case "ledger.checkpoint_every":
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			if n != 0 && (n < ledger.MinCheckpointEvery || n > ledger.MaxCheckpointEvery) {
				return api.FieldErrorf(http.StatusBadRequest, k, "%s: %d entries; allowed: %d .. %d entries, a time from 1m to 30d, or 0 (every %d entries)", k, n, ledger.MinCheckpointEvery, ledger.MaxCheckpointEvery, ledger.DefaultCheckpointEvery)
			}
			u.LedgerCheckpointEvery = &n
			return nil
		}
		ms, ok := parseMS(v)
		if !ok || ms < ledger.MinCheckpointEveryMS || ms > ledger.MaxCheckpointEveryMS {
			return api.FieldErrorf(http.StatusBadRequest, k, "%s: %q; allowed: %d .. %d entries, a time from 1m to 30d like 6h or 2d, or 0 (every %d entries)", k, api.Ellipsize(v), ledger.MinCheckpointEvery, ledger.MaxCheckpointEvery, ledger.DefaultCheckpointEvery)
		}
		u.LedgerCheckpointEveryMS = &ms
	case "ledger.retain", "jobs.retain":
		ms, ok := parseMS(v)
		if v == "0" || strings.EqualFold(v, "none") {
			ms, ok = 0, true
		}
		if !ok || (ms != 0 && (ms < ledger.MinRetainMS || ms > 10*365*24*3_600_000)) {
			return api.FieldErrorf(http.StatusBadRequest, k, "%s: %q; allowed: a time from 1h to 10 years like 720h or 30d, or 0 (keep everything)", k, api.Ellipsize(v))
		}
		if k == "jobs.retain" {
			u.JobsRetainMS = &ms
		} else {
			u.LedgerRetainMS = &ms
		}
	}
	return nil
}

// parseMS reads a Go duration or a whole number of days ("30d"), in ms.
func parseMS(v string) (int64, bool) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n <= 0 || n > 3650 {
			return 0, false
		}
		return n * 24 * 3_600_000, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d.Milliseconds(), true
}
