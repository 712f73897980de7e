package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// EnvFakeTime is a test-facing hook for clock-skew tests (make chaos): when
// set, `cshare node run` reads its clock (node.Options.Now, through which
// the node reads all time) as the real time plus this offset. It keeps
// libfaketime's relative form, "+5m", "-300" (seconds), "+1.5h", "-2d",
// because libfaketime itself (LD_PRELOAD) cannot skew a Go binary: the Go
// runtime reads the clock through the vDSO, never through libc. Only the
// node's own clock moves; libp2p, TLS and the processes of items keep the
// real one.
const EnvFakeTime = "FAKETIME"

// maxFakeOffset bounds the offset: skew, not time travel.
const maxFakeOffset = 365 * 24 * time.Hour

// fakeClock returns the clock for a FAKETIME value: nil (the real clock)
// for "", else the real clock shifted by the offset.
func fakeClock(spec string) (func() time.Time, error) {
	off, err := parseFakeOffset(spec)
	if err != nil || off == 0 {
		return nil, err
	}
	return func() time.Time { return time.Now().Add(off) }, nil
}

// parseFakeOffset parses libfaketime's relative offset: an optional sign,
// a number, and an optional unit s, m, h, d or y (seconds when absent).
func parseFakeOffset(spec string) (time.Duration, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return 0, nil
	}
	bad := func() error {
		return fmt.Errorf("%s: %q is not an offset; cshare takes libfaketime's relative form only, e.g. +5m, -300, +1.5h (units s, m, h, d, y)", EnvFakeTime, spec)
	}
	unit := time.Second
	switch s[len(s)-1] {
	case 's':
		s = s[:len(s)-1]
	case 'm':
		unit, s = time.Minute, s[:len(s)-1]
	case 'h':
		unit, s = time.Hour, s[:len(s)-1]
	case 'd':
		unit, s = 24*time.Hour, s[:len(s)-1]
	case 'y':
		unit, s = 365*24*time.Hour, s[:len(s)-1]
	}
	if s == "" || strings.ContainsAny(s, "eEinINxX_") {
		return 0, bad()
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, bad()
	}
	if v*float64(unit) > float64(maxFakeOffset) || v*float64(unit) < -float64(maxFakeOffset) {
		return 0, fmt.Errorf("%s: %q is more than a year away; give an offset within ±1y", EnvFakeTime, spec)
	}
	return time.Duration(v * float64(unit)), nil
}
