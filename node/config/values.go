package config

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/cshare/cshare/ledger/jobspec"
)

func (p *parser) duration(e entry) (time.Duration, error) {
	n := e.value
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, e.path, "is %s; expected a duration like 30s", kindName(n))
	}
	if n.ShortTag() != "!!str" {
		return 0, p.errf(n, e.path, "%s is not a duration; write it with a unit, like 30s", show(n))
	}
	d, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return 0, p.errf(n, e.path, "%s is not a duration; write it like 30s, 1m or 1m30s", show(n))
	}
	if d == 0 {
		// 0 is how File says "not set"; a written 0 is out of range.
		return 0, p.errf(n, e.path, "0s is outside %s..%s", fmtDur(MinHeartbeatInterval), fmtDur(MaxHeartbeatInterval))
	}
	return d, nil
}

var wholeRE = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// integer decodes a whole number.
func (p *parser) integer(n *yaml.Node, path string) (int64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, path, "is %s; expected a number", kindName(n))
	}
	looksWhole := wholeRE.MatchString(n.Value)
	switch n.ShortTag() {
	case "!!int":
		var v int64
		if err := n.Decode(&v); err == nil {
			return v, nil
		}
	case "!!float":
		if !looksWhole {
			return 0, p.errf(n, path, "%s is not a whole number", show(n))
		}
	}
	if looksWhole {
		return 0, p.errf(n, path, "%s is too large", show(n))
	}
	return 0, p.errf(n, path, "%s is not a number", show(n))
}

// bounded decodes a whole number of the range rng ("1..100"): one too
// large for int64 is outside the range, said so, not merely "too large".
func (p *parser) bounded(n *yaml.Node, path, rng string) (int64, error) {
	if n.Kind == yaml.ScalarNode && wholeRE.MatchString(n.Value) {
		if _, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 10, 64); err != nil {
			return 0, p.errf(n, path, "%s is outside %s", show(n), rng)
		}
	}
	return p.integer(n, path)
}

// percent decodes cpu_limit: 80 or "80%".
func (p *parser) percent(e entry) (int, error) {
	n := e.value
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		s, _ := strings.CutSuffix(strings.TrimSpace(n.Value), "%")
		s = strings.TrimSpace(s)
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil && wholeRE.MatchString(s) {
			return 0, p.errf(n, e.path, "%s is outside 1..100", show(n))
		}
		if err != nil {
			return 0, p.errf(n, e.path, "%s is not a number; write a percentage like 80", show(n))
		}
		return clampInt(v), nil
	}
	v, err := p.bounded(n, e.path, "1..100")
	return clampInt(v), err
}

// sizeMB decodes a size in MB: a whole number of MB, or a string with a
// binary unit read as jobspec.ParseSizeMB reads it ("16GB" = 16384; a
// fractional MB is rounded up; at most 16TiB).
func (p *parser) sizeMB(e entry) (int64, error) {
	const hint = `give MB as a number (16384) or a size like "16GB"`
	n := e.value
	if n.Kind != yaml.ScalarNode {
		return 0, p.errf(n, e.path, "is %s; %s", kindName(n), hint)
	}
	switch n.ShortTag() {
	case "!!int":
		return p.integer(n, e.path)
	case "!!float":
		return 0, p.errf(n, e.path, "%s is not a whole number of MB", show(n))
	case "!!str":
	default:
		return 0, p.errf(n, e.path, "%s is not a size; %s", show(n), hint)
	}
	s := strings.TrimSpace(n.Value)
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		return v, nil // a quoted plain number is MB too
	}
	// A size with a unit, read by the job spec's one rule (jobspec); a sign
	// is kept so that a negative size is refused as negative below.
	if strings.IndexFunc(s, unicode.IsLetter) < 0 {
		return 0, p.errf(n, e.path, "%s is not a size; %s", show(n), hint) // "16.5": no unit
	}
	neg := strings.HasPrefix(s, "-")
	mb, err := jobspec.ParseSizeMB(e.path, strings.TrimPrefix(s, "-"))
	var je *jobspec.Error
	switch {
	case err == nil:
	case errors.As(err, &je) && je.Problem == jobspec.TooLarge:
		return 0, p.errf(n, e.path, "%s is too large; allowed: at most 16TiB", show(n))
	default:
		return 0, p.errf(n, e.path, "%s is not a size; %s", show(n), hint)
	}
	if neg {
		mb = -mb
	}
	return mb, nil
}

// clampInt narrows v to int without wrapping, so range checks still fire.
func clampInt(v int64) int {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	if v < math.MinInt32 {
		return math.MinInt32
	}
	return int(v)
}

func fmtDur(d time.Duration) string {
	s := d.String()
	s = strings.Replace(s, "m0s", "m", 1)
	s = strings.Replace(s, "h0m", "h", 1)
	return s
}
