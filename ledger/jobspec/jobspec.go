// Package jobspec owns the one set of parsers and validators of a job's
// spec: cores, memory, the agenda range, max_cpus, priority, cpus, GPUs,
// retries, the driver, the command and environment names. The CLI parses
// the user's strings with the Parse functions and sends numbers; the node's
// API checks those numbers with the Check functions; the ledger fold
// (ledger.ValidateJobSpec) calls the same Check functions on the typed
// values of every job entry; node.yaml sizes use ParseSizeMB. So no layer is
// looser than another, and one value rounds the same way everywhere.
//
// Rules, each in one place:
//   - cores are millicores: "0.5" is 500. A value is rounded to the nearest
//     millicore; a positive value that rounds to 0 is refused, as is one
//     above 4096 cores. 0 means "no limit".
//   - sizes are read as Docker reads them (go-units RAMInBytes: 64m = 64MB =
//     64MiB = 64<<20 bytes; a bare number is bytes) and rounded up to whole
//     MB (MiB). Above 16TiB is refused instead of overflowing.
//   - a range is "START-END" or "N", numbers >= 0, at most MaxItems items.
//   - max_cpus is a number >= 0, or -1 / "*" for the org's max_cpus_limit.
//
// Every error is an *Error: one line naming the field, the value and what
// is allowed. The CLI renames the field to its flag with Rename.
//
// The package is pure and imports nothing of cshare, so the ledger fold can
// use it.
package jobspec

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	units "github.com/docker/go-units"
)

// Bounds of a job spec.
const (
	MaxCoresMilli   = 4096 * 1000 // 4096 cores
	MinMemoryMB     = 4           // Docker's own floor is 6MB; 4MB is ours
	MaxMemoryMB     = 16 << 20    // 16TiB in MB
	MinPriority     = 1           // the highest
	MaxPriority     = 9999        // the lowest
	DefaultPriority = MaxPriority
	MaxItems        = 1_000_000 // items of a job's agenda
	MaxCPUs         = 1 << 20   // cpus, max_cpus and the org's limits
	MaxGPUs         = 64
	MaxRetries      = 100
	MaxCmdArgs      = 4096
)

// Error is a refused value: Field is the spec's field ("memory") or, in the
// CLI, the flag ("--memory"); Value is the value as given; Problem says what
// is wrong and Allowed what would do.
type Error struct {
	Field   string
	Value   string
	Problem string
	Allowed string
}

func (e *Error) Error() string {
	s := e.Field + ": " + e.Value
	if e.Problem != "" {
		s += " " + e.Problem
	}
	if e.Allowed != "" {
		s += "; " + e.Allowed
	}
	return s
}

// Rename returns err with its field renamed (the CLI names its flags), or
// err itself when it is not an *Error.
func Rename(err error, field string) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	c := *e
	c.Field = field
	return &c
}

func fail(field, value, problem, allowed string) error {
	return &Error{Field: field, Value: value, Problem: problem, Allowed: allowed}
}

// oneLine quotes a user's string for an error message: %q keeps control
// characters and newlines out of the one line.
func quote(s string) string { return strconv.Quote(s) }

const coresAllowed = "allowed: 0.001 to 4096 cores, e.g. 0.5 or 2"

// ParseCores reads CPU cores per instance ("0.5", "2") into millicores,
// rounded to the nearest millicore.
func ParseCores(s string) (int64, error) {
	s = strings.TrimSpace(s)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fail("cores", quote(s), "is not a number of CPU cores", coresAllowed)
	}
	if f <= 0 {
		return 0, fail("cores", s, "is not more than 0", coresAllowed)
	}
	if f > MaxCoresMilli/1000 {
		return 0, fail("cores", s, "is above the maximum of 4096", coresAllowed)
	}
	m := int64(math.Round(f * 1000))
	if m == 0 {
		return 0, fail("cores", s, "rounds to 0 millicores", coresAllowed)
	}
	return m, CheckCores(m)
}

// CheckCores checks millicores: 0 (no limit) or 1..MaxCoresMilli.
func CheckCores(milli int64) error {
	if milli < 0 || milli > MaxCoresMilli {
		return fail("cores", strconv.FormatInt(milli, 10)+" millicores", "is out of range", "allowed: 0 (no limit) or 1 to 4096000 millicores (0.001 to 4096 cores)")
	}
	return nil
}

// TooLarge is the Problem of a size above MaxMemoryMB.
const TooLarge = "is above the maximum of 16TiB"

const sizeAllowed = "allowed: a size like 512m, 2g or 4GiB, at most 16TiB"

// ParseSizeMB reads a size as Docker does (go-units RAMInBytes: 512m, 2GiB;
// a bare number is bytes) into whole MB, rounded up; at most MaxMemoryMB.
// field names it in errors.
func ParseSizeMB(field, s string) (int64, error) {
	s = strings.TrimSpace(s)
	b, err := units.RAMInBytes(s)
	if err != nil {
		return 0, fail(field, quote(s), "is not a size", sizeAllowed)
	}
	// RAMInBytes refuses negative sizes, so a negative result is a float
	// that overflowed int64 (amd64); arm64 saturates to MaxInt64 instead.
	if b < 0 || b > MaxMemoryMB<<20 {
		return 0, fail(field, s, TooLarge, sizeAllowed)
	}
	return BytesToMB(b), nil
}

// BytesToMB converts bytes to whole MB (MiB), rounded up: the one rounding
// rule of sizes.
func BytesToMB(b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (b-1)>>20 + 1
}

// ParseMemory reads memory per instance ("512m", "2GiB") into MB.
func ParseMemory(s string) (int64, error) {
	mb, err := ParseSizeMB("memory", s)
	if err != nil {
		return 0, err
	}
	if mb < MinMemoryMB {
		return 0, fail("memory", strings.TrimSpace(s), "is under the minimum of 4MB", sizeAllowed)
	}
	return mb, nil
}

// CheckMemoryMB checks memory per instance in MB: 0 (no limit) or
// MinMemoryMB..MaxMemoryMB.
func CheckMemoryMB(mb int64) error {
	if mb != 0 && (mb < MinMemoryMB || mb > MaxMemoryMB) {
		return fail("memory", strconv.FormatInt(mb, 10)+" MB", "is out of range", "allowed: 0 (no limit) or 4 to 16777216 MB (16TiB)")
	}
	return nil
}

var rangeRE = regexp.MustCompile(`^([0-9]+)(?:-([0-9]+))?$`)

const rangeAllowed = "allowed: START-END or one number, e.g. 1-100 or 7, at most 1000000 items"

// ParseRange reads an agenda range, "1-100" or "7".
func ParseRange(s string) (start, end int64, err error) {
	s = strings.TrimSpace(s)
	m := rangeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, fail("range", quote(s), "is not a range", rangeAllowed)
	}
	start, err1 := strconv.ParseInt(m[1], 10, 64)
	end = start
	var err2 error
	if m[2] != "" {
		end, err2 = strconv.ParseInt(m[2], 10, 64)
	}
	if err1 != nil || err2 != nil {
		return 0, 0, fail("range", s, "is out of range", rangeAllowed)
	}
	if start > end {
		return 0, 0, fail("range", s, "is empty", "the start must not exceed the end")
	}
	return start, end, CheckRange(start, end)
}

// CheckRange checks an agenda range: 0 <= start <= end, at most MaxItems
// items.
func CheckRange(start, end int64) error {
	v := fmt.Sprintf("%d-%d", start, end)
	switch {
	case start < 0:
		return fail("range", v, "starts below 0", rangeAllowed)
	case start > end:
		return fail("range", v, "is empty", "the start must not exceed the end")
	case uint64(end)-uint64(start) >= MaxItems: // exact even where end-start overflows int64
		return fail("range", v, "has more than 1000000 items", rangeAllowed)
	}
	return nil
}

const maxCPUsAllowed = "allowed: a number from 0 (no secondaries) to 1048576, or -1 or * for the org's max_cpus_limit"

// ParseMaxCPUs reads max_cpus: a number, or "*" (-1: the org's
// max_cpus_limit).
func ParseMaxCPUs(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "*" {
		return -1, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fail("max_cpus", quote(s), "is not a number", maxCPUsAllowed)
	}
	return n, CheckMaxCPUs(n)
}

// CheckMaxCPUs checks max_cpus: -1 ("*") to MaxCPUs.
func CheckMaxCPUs(n int64) error {
	if n < -1 || n > MaxCPUs {
		return fail("max_cpus", strconv.FormatInt(n, 10), "is out of range", maxCPUsAllowed)
	}
	return nil
}

// FormatMaxCPUs renders max_cpus as a user writes it: "*" for -1.
func FormatMaxCPUs(n int64) string {
	if n < 0 {
		return "*"
	}
	return strconv.FormatInt(n, 10)
}

// CheckPriority checks a priority: 1 (the highest) to 9999 (the lowest).
func CheckPriority(p int64) error {
	if p < MinPriority || p > MaxPriority {
		return fail("priority", strconv.FormatInt(p, 10), "is out of range", "allowed: 1 (the highest) to 9999 (the lowest)")
	}
	return nil
}

// CheckCPUs checks cpus, the primary instances: 1 to MaxCPUs.
func CheckCPUs(n int64) error {
	if n < 1 || n > MaxCPUs {
		return fail("cpus", strconv.FormatInt(n, 10), "is out of range", "allowed: 1 to 1048576 primary instances")
	}
	return nil
}

// CheckGPUs checks GPUs per instance: 0 to MaxGPUs.
func CheckGPUs(n int64) error {
	if n < 0 || n > MaxGPUs {
		return fail("gpus", strconv.FormatInt(n, 10), "is out of range", "allowed: 0 to 64 GPUs per instance")
	}
	return nil
}

// CheckRetries checks retries: 0 to MaxRetries.
func CheckRetries(n int64) error {
	if n < 0 || n > MaxRetries {
		return fail("retries", strconv.FormatInt(n, 10), "is out of range", "allowed: 0 to 100")
	}
	return nil
}

// CheckDriver checks a driver name.
func CheckDriver(d string) error {
	if d != "docker" && d != "exec" {
		return fail("driver", quote(d), "is not a driver", "allowed: docker, exec")
	}
	return nil
}

// CheckCmd checks a job's command: at least a program, which is not blank.
func CheckCmd(cmd []string) error {
	switch {
	case len(cmd) == 0:
		return fail("cmd", "[]", "is empty", "give the command after --, e.g. -- sleep 5")
	case strings.TrimSpace(cmd[0]) == "":
		return fail("cmd", quote(cmd[0]), "is not a program", "the first word of the command must not be blank")
	case len(cmd) > MaxCmdArgs:
		return fail("cmd", strconv.Itoa(len(cmd))+" arguments", "is too many", "allowed: at most 4096")
	}
	return nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// CheckEnvName checks an environment variable's name: like MY_VAR, and not
// CSHARE_*, which cshare sets.
func CheckEnvName(k string) error {
	switch {
	case !envNameRE.MatchString(k):
		return fail("env", quote(k), "is not a variable name", "allowed: letters, digits and _, not starting with a digit, e.g. MY_VAR")
	case strings.HasPrefix(k, "CSHARE_"):
		return fail("env", quote(k), "is reserved", "CSHARE_* variables are set by cshare")
	}
	return nil
}

// ParseEnv reads NAME=VALUE pairs; a later NAME wins, as in docker run.
func ParseEnv(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(kvs))
	for _, s := range kvs {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fail("env", quote(s), "is not NAME=VALUE", "give a name like MY_VAR, =, and the value")
		}
		if err := CheckEnvName(k); err != nil {
			return nil, err
		}
		env[k] = v
	}
	return env, nil
}
