package cli

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestParseFakeOffset(t *testing.T) {
	ok := map[string]time.Duration{
		"": 0, "+5m": 5 * time.Minute, "-300": -300 * time.Second, "-300s": -300 * time.Second,
		"+1.5h": 90 * time.Minute, "-2d": -48 * time.Hour, "0": 0, " +10 ": 10 * time.Second,
	}
	for in, want := range ok {
		got, err := parseFakeOffset(in)
		if err != nil || got != want {
			t.Errorf("parseFakeOffset(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"@2020-01-01 00:00:00", "2020-01-01", "+", "m", "+5x", "1e3", "NaN", "Inf", "+0x10", "+2y", "5m i2.0"} {
		if _, err := parseFakeOffset(in); err == nil || !strings.HasPrefix(err.Error(), "FAKETIME: ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("parseFakeOffset(%q) = %v; want a one-line FAKETIME error", in, err)
		}
	}
}

func TestFakeClockShifts(t *testing.T) {
	if c, err := fakeClock(""); c != nil || err != nil {
		t.Fatalf("fakeClock(\"\") = %v, %v; want the real clock (nil)", c != nil, err)
	}
	c, err := fakeClock("-5m")
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	got := c()
	after := time.Now()
	if got.Before(before.Add(-5*time.Minute)) || got.After(after.Add(-5*time.Minute)) {
		t.Fatalf("fakeClock(-5m)() = %v; want between %v and %v", got, before.Add(-5*time.Minute), after.Add(-5*time.Minute))
	}
}

// node run refuses a FAKETIME it cannot read, naming the variable.
func TestNodeRunRefusesBadFakeTime(t *testing.T) {
	t.Setenv(EnvFakeTime, "@2020-01-01 00:00:00")
	r := runCLI("node", "run", "--data-dir", t.TempDir())
	if r.code == 0 || !strings.Contains(r.stderr, "FAKETIME") {
		t.Fatalf("node run with a bad FAKETIME: exit %d, stderr %q", r.code, r.stderr)
	}
}

// node run hands a FAKETIME offset to the node as its clock.
func TestNodeRunPassesFakeTime(t *testing.T) {
	t.Setenv(EnvFakeTime, "+300")
	var got time.Time
	r := runCLIWith(func(a *app) {
		a.runNode = func(_ context.Context, o runOptions) error {
			if o.Now != nil {
				got = o.Now()
			}
			return nil
		}
	}, "node", "run", "--data-dir", t.TempDir())
	if r.code != 0 {
		t.Fatalf("node run: exit %d: %s", r.code, r.stderr)
	}
	if d := time.Until(got); d < 290*time.Second || d > 300*time.Second {
		t.Fatalf("the node's clock is %v ahead; want 300s", d)
	}
}
