package orgsvc

import (
	"strings"
	"testing"

	"github.com/cshare/cshare/ledger"
)

// TestParsePolicy: org set's policy values in the seed's units (a bare
// number is seconds or MB), sizes and durations as a user writes them, 0
// and none to remove; anything else is one line naming the setting.
func TestParsePolicy(t *testing.T) {
	for _, c := range []struct {
		name, v string
		want    int64
		err     string
	}{
		{"max_machines_per_user", "10", 10, ""},
		{"max_machines_per_user", "none", 0, ""},
		{"max_machines_per_user", "1.5", 0, "policy.max_machines_per_user"},
		{"max_machines_per_user", "70000", 0, "out of range"},
		{"max_concurrent_jobs_per_user", "0", 0, ""},
		{"max_job_runtime", "86400", 86_400_000, ""},
		{"max_job_runtime", "24h", 86_400_000, ""},
		{"max_job_runtime", "2d", 2 * 86_400_000, ""},
		{"max_job_runtime", "500ms", 0, "below the minimum 1s"},
		{"max_job_runtime", "soon", 0, "policy.max_job_runtime"},
		{"max_job_runtime", "-5", 0, "policy.max_job_runtime"},
		{"max_job_memory", "65536", 65536, ""},
		{"max_job_memory", "64g", 65536, ""},
		{"max_job_memory", "lots", 0, "policy.max_job_memory"},
		{"default_item_timeout", "10m", 600_000, ""},
		{"max_jobs", "3", 0, "unknown setting"},
	} {
		got, err := ParsePolicy(c.name, c.v)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s=%s: %d, %v; want %d", c.name, c.v, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s=%s: %v; want one line with %q", c.name, c.v, err, c.err)
		}
	}
}

// FuzzParsePolicy: any name and value give a value the fold takes, or one
// line; never a panic.
func FuzzParsePolicy(f *testing.F) {
	for _, n := range ledger.PolicyNames {
		f.Add(n, "10")
		f.Add(n, "24h")
		f.Add(n, "64g")
	}
	f.Add("max_job_runtime", "9223372036854775807")
	f.Add("max_job_memory", "1e30")
	f.Fuzz(func(t *testing.T, name, v string) {
		x, err := ParsePolicy(name, v)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q=%q: %q is not one line", name, v, err)
			}
			return
		}
		if err := ledger.CheckPolicy(name, x); err != nil {
			t.Fatalf("%q=%q parsed to %d, which the fold refuses: %v", name, v, x, err)
		}
	})
}
