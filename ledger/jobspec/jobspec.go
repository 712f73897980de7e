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
//     millicore; one under 0.001 core is refused (never rounded to 0, which
//     means "no limit"), as is one above 4096 cores.
//   - sizes are read as Docker reads them (go-units RAMInBytes: 64m = 64MB =
//     64MiB = 64<<20 bytes; a bare number is bytes) and rounded up to whole
//     MB (MiB). Memory under 4 MiB (0 among it) is refused, as is a size
//     above 16 TiB, instead of overflowing.
//   - counts (priority, cpus, gpus, retries, max_cpus) are whole numbers,
//     written as a user may ("1e3" is 1000).
//
// Messages speak in the units a user thinks in, whichever side checks: the
// Check functions render millicores as cores and MB as sizes (FormatCores,
// FormatMB), so the CLI (which parses "1e9" cores) and the API (which gets
// 1000000000000 millicores) say the same "cores: 1000000000 is above the
// maximum 4096". A value out of range says "is above the maximum N" or "is
// below the minimum N".
//   - a range is "START-END" or "N", numbers >= 0, at most MaxItems items.
//   - an item timeout is a Go duration ("90s", "2h"), whole ms rounded up,
//     1s to a year, 0 or "none" for none.
//   - disk and GPU memory are sizes, 1 MiB to 16 TiB; GPU memory only with
//     GPUs.
//   - max_cpus is a number >= 0, or -1 / "*" for the org's max_cpus_limit.
//
// Every error is an *Error: one line naming the field, the value and what
// is allowed. The CLI renames the field to its flag with Rename.
//
// Text a job runs (cmd, env, image) is checked here too: no NUL byte and
// valid UTF-8 in the command and the environment (JSON would turn a bad
// byte into U+FFFD on the way, so it is refused, not changed), and an image
// reference as Docker reads it (github.com/distribution/reference). A
// value is echoed escaped and cut to 64 characters (text.Echo).
//
// The package is pure and imports of cshare only internal/text (pure too),
// so the ledger fold can use it.
package jobspec

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	units "github.com/docker/go-units"

	"github.com/cshare/cshare/internal/text"
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
	MaxImageLen     = 256      // bytes of an image reference (Docker bounds its name to 255)
	MaxSpecText     = 48 << 10 // bytes of cmd and env together: a ledger entry is at most 64 KiB
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

// quote quotes a user's string for an error message: escaped (control
// characters and newlines stay out of the one line) and cut to 64
// characters (text.Echo).
func quote(s string) string { return text.Echo(s) }

// clip cuts an unquoted echo (a number as written) to 64 characters.
func clip(s string) string { return text.Clip(s) }

// above and below are the Problems of a value out of its range.
func above(max string) string { return "is above the maximum " + max }
func below(min string) string { return "is below the minimum " + min }

// inRange checks lo <= n <= hi; format renders a value as the user thinks
// of it (the bounds too).
func inRange(field string, n, lo, hi int64, format func(int64) string, allowed string) error {
	switch {
	case n > hi:
		return fail(field, format(n), above(format(hi)), allowed)
	case n < lo:
		return fail(field, format(n), below(format(lo)), allowed)
	}
	return nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

var numberRE = regexp.MustCompile(`^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$`)

// parseWhole reads a whole number as a user may write it ("7", "1e3"),
// checked against lo..hi. A number beyond int64 is above (or below) the
// range, named as written, never strconv's text.
func parseWhole(field, s string, lo, hi int64, allowed string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, inRange(field, n, lo, hi, itoa, allowed)
	}
	if !numberRE.MatchString(s) {
		return 0, fail(field, quote(s), "is not a number", allowed)
	}
	f, _ := strconv.ParseFloat(s, 64) // ±Inf on overflow
	switch {
	case f > float64(hi) && f >= math.MaxInt64:
		return 0, fail(field, clip(s), above(itoa(hi)), allowed)
	case f < float64(lo) && f <= math.MinInt64:
		return 0, fail(field, clip(s), below(itoa(lo)), allowed)
	case f != math.Trunc(f):
		return 0, fail(field, clip(s), "is not a whole number", allowed)
	}
	n := int64(f)
	return n, inRange(field, n, lo, hi, itoa, allowed)
}

const coresAllowed = "allowed: 0.001 to 4096 cores per instance, e.g. 0.5 or 2"

// FormatCores renders millicores as cores, as a user writes them: 500 is
// "0.5", 2000 is "2", 1 is "0.001".
func FormatCores(milli int64) string {
	s := strconv.FormatInt(milli/1000, 10)
	if milli < 0 && milli > -1000 {
		s = "-0"
	}
	frac := milli % 1000
	if frac < 0 {
		frac = -frac
	}
	if frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%03d", frac), "0")
	}
	return s
}

// ParseCores reads CPU cores per instance ("0.5", "2") into millicores,
// rounded to the nearest millicore. A value under 0.001 is refused, never
// rounded to 0 (no limit).
func ParseCores(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if !numberRE.MatchString(s) {
		return 0, fail("cores", quote(s), "is not a number of CPU cores", coresAllowed)
	}
	f, _ := strconv.ParseFloat(s, 64)
	switch {
	case f >= 1e15: // beyond what millicores hold exactly
		return 0, fail("cores", clip(s), above(FormatCores(MaxCoresMilli)), coresAllowed)
	case f < 0.0005: // rounds below one millicore: never to 0, no limit
		return 0, fail("cores", clip(s), below("0.001"), coresAllowed)
	}
	m := int64(math.Round(f * 1000))
	return m, CheckCores(m)
}

// CheckCores checks millicores: 0 (no limit) or 1..MaxCoresMilli. Its
// messages speak in cores, as ParseCores's do, so the CLI and the API say
// the same of one value.
func CheckCores(milli int64) error {
	if milli == 0 {
		return nil
	}
	return inRange("cores", milli, 1, MaxCoresMilli, FormatCores, coresAllowed)
}

// binaryUnits are the units of FormatBytes.
var binaryUnits = []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// FormatBytes renders a size as a user reads it: "512 MiB", "1.5 GiB",
// "2 KiB", "100 B".
func FormatBytes(b float64) string {
	i := 0
	for b >= 1024 && i < len(binaryUnits)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.4g %s", b, binaryUnits[i])
}

// FormatMB renders whole MB (MiB) as a size, exactly, in the largest
// unit that needs at most two decimals: 512 is "512 MiB", 4096 is
// "4 GiB", 1536 is "1.5 GiB", 1500 is "1500 MiB".
func FormatMB(mb int64) string {
	sign := ""
	if mb < 0 {
		sign, mb = "-", -mb
	}
	unit := 2 // MiB
	for unit < len(binaryUnits)-1 {
		div := int64(1) << (10 * (unit - 1)) // MB in the next unit
		if mb < div || (mb*100)%div != 0 && mb < math.MaxInt64/100 {
			break
		}
		unit++
	}
	div := int64(1) << (10 * (unit - 2))
	v := strconv.FormatFloat(float64(mb)/float64(div), 'f', -1, 64)
	return sign + v + " " + binaryUnits[unit]
}

// TooLarge is the Problem of a size above MaxMemoryMB.
var TooLarge = above(FormatMB(MaxMemoryMB))

const sizeAllowed = "allowed: a size like 512m, 2g or 4GiB, from 4 MiB to 16 TiB"

// sizeRE is go-units' size syntax (RAMInBytes): a number, a unit, an
// optional i and an optional b.
var sizeRE = regexp.MustCompile(`^(\d+(?:\.\d+)*) ?([kKmMgGtTpP])?[iI]?[bB]?$`)

// ParseSizeMB reads a size as Docker does (go-units RAMInBytes: 512m, 2GiB;
// a bare number is bytes) into whole MB, rounded up; at most MaxMemoryMB.
// field names it in errors.
func ParseSizeMB(field, s string) (int64, error) {
	s = strings.TrimSpace(s)
	b, err := units.RAMInBytes(s)
	if err != nil || !sizeRE.MatchString(s) { // RAMInBytes takes "5g\n\x9f" for 5g
		return 0, fail(field, quote(s), "is not a size", sizeAllowed)
	}
	// RAMInBytes refuses negative sizes, so a negative result is a float
	// that overflowed int64 (amd64); arm64 saturates to MaxInt64 instead.
	// Either way the size in MB is worked out again in floating point, to
	// name it as the API would.
	if b < 0 || b > MaxMemoryMB<<20 {
		v := clip(s)
		if m := sizeRE.FindStringSubmatch(s); m != nil {
			f, _ := strconv.ParseFloat(m[1], 64)
			mult := map[string]float64{"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}[strings.ToLower(m[2])]
			if mb := math.Ceil(f * mult / (1 << 20)); mb < math.MaxInt64/2 {
				v = FormatMB(int64(mb))
			}
		}
		return 0, fail(field, v, TooLarge, sizeAllowed)
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

// ParseMemory reads memory per instance ("512m", "2GiB") into MB. A value
// under MinMemoryMB (0 among them) is refused, never taken as no limit.
func ParseMemory(s string) (int64, error) {
	mb, err := ParseSizeMB("memory", s)
	if err != nil {
		return 0, err
	}
	if mb < MinMemoryMB {
		v := clip(strings.TrimSpace(s))
		if mb > 0 {
			v = FormatMB(mb) // as rounded up: 100 bytes is 1 MiB
		}
		return 0, fail("memory", v, below(FormatMB(MinMemoryMB)), sizeAllowed)
	}
	return mb, nil
}

// CheckMemoryMB checks memory per instance in MB: 0 (no limit) or
// MinMemoryMB..MaxMemoryMB. Its messages speak in sizes, as ParseMemory's
// do.
func CheckMemoryMB(mb int64) error {
	if mb == 0 {
		return nil
	}
	return inRange("memory", mb, MinMemoryMB, MaxMemoryMB, FormatMB, sizeAllowed)
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
		return 0, 0, fail("range", clip(s), "has a number above the maximum "+itoa(math.MaxInt64), rangeAllowed)
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
		n := strconv.FormatUint(uint64(end)-uint64(start)+1, 10)
		return fail("range", v, "has "+n+" items, above the maximum "+itoa(MaxItems), rangeAllowed)
	}
	return nil
}

const maxCPUsAllowed = "allowed: a number from 0 (no secondaries) to 1048576, or -1 or * for the org's max_cpus_limit"

// ParseMaxCPUs reads max_cpus: a number, or "*" (-1: the org's
// max_cpus_limit).
func ParseMaxCPUs(s string) (int64, error) {
	if strings.TrimSpace(s) == "*" {
		return -1, nil
	}
	return parseWhole("max_cpus", s, -1, MaxCPUs, maxCPUsAllowed)
}

// CheckMaxCPUs checks max_cpus: -1 ("*") to MaxCPUs.
func CheckMaxCPUs(n int64) error {
	return inRange("max_cpus", n, -1, MaxCPUs, itoa, maxCPUsAllowed)
}

// FormatMaxCPUs renders max_cpus as a user writes it: "*" for -1.
func FormatMaxCPUs(n int64) string {
	if n < 0 {
		return "*"
	}
	return strconv.FormatInt(n, 10)
}

const (
	priorityAllowed = "allowed: 1 (the highest) to 9999 (the lowest)"
	cpusAllowed     = "allowed: 1 to 1048576 primary instances"
	gpusAllowed     = "allowed: 0 to 64 GPUs per instance"
	retriesAllowed  = "allowed: 0 to 100"
)

// ParsePriority reads a priority ("5"; "1e3" is 1000).
func ParsePriority(s string) (int64, error) {
	return parseWhole("priority", s, MinPriority, MaxPriority, priorityAllowed)
}

// CheckPriority checks a priority: 1 (the highest) to 9999 (the lowest).
func CheckPriority(p int64) error {
	return inRange("priority", p, MinPriority, MaxPriority, itoa, priorityAllowed)
}

// ParseCPUs reads cpus, the primary instances.
func ParseCPUs(s string) (int64, error) { return parseWhole("cpus", s, 1, MaxCPUs, cpusAllowed) }

// CheckCPUs checks cpus, the primary instances: 1 to MaxCPUs.
func CheckCPUs(n int64) error { return inRange("cpus", n, 1, MaxCPUs, itoa, cpusAllowed) }

// ParseGPUs reads GPUs per instance.
func ParseGPUs(s string) (int64, error) { return parseWhole("gpus", s, 0, MaxGPUs, gpusAllowed) }

// CheckGPUs checks GPUs per instance: 0 to MaxGPUs.
func CheckGPUs(n int64) error { return inRange("gpus", n, 0, MaxGPUs, itoa, gpusAllowed) }

// ParseRetries reads retries.
func ParseRetries(s string) (int64, error) {
	return parseWhole("retries", s, 0, MaxRetries, retriesAllowed)
}

// CheckRetries checks retries: 0 to MaxRetries.
func CheckRetries(n int64) error { return inRange("retries", n, 0, MaxRetries, itoa, retriesAllowed) }

// CheckDriver checks a driver name.
func CheckDriver(d string) error {
	if d != "docker" && d != "exec" {
		return fail("driver", quote(d), "is not a driver", "allowed: docker, exec")
	}
	return nil
}

// CheckCmd checks a job's command: at least a program, which is not blank,
// and every word valid UTF-8 without a NUL byte (a NUL cannot reach a
// process's arguments, and JSON would change a bad byte to U+FFFD).
func CheckCmd(cmd []string) error {
	switch {
	case len(cmd) == 0:
		return fail("cmd", "[]", "is empty", "give the job's command after --, e.g. cshare job submit -- sleep 5")
	case strings.TrimSpace(cmd[0]) == "":
		return fail("cmd", quote(cmd[0]), "is not a program", "the first word of the command must not be blank")
	case len(cmd) > MaxCmdArgs:
		return fail("cmd", strconv.Itoa(len(cmd))+" arguments", above(strconv.Itoa(MaxCmdArgs)), "allowed: at most 4096 words")
	}
	for i, a := range cmd {
		if err := checkText(fmt.Sprintf("word %d of the command", i+1), a); err != nil {
			return fail("cmd", quote(a), err.Error(), textAllowed)
		}
	}
	return nil
}

const textAllowed = "allowed: UTF-8 text without NUL bytes"

// checkText says what makes s no text a process can take: a NUL byte or
// bytes that are not UTF-8; what names s in the problem.
func checkText(what, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return fmt.Errorf("(%s) holds a NUL byte at byte %d", what, i)
	}
	if i := text.InvalidAt(s); i >= 0 {
		return fmt.Errorf("(%s) is not valid UTF-8 at byte %d", what, i)
	}
	return nil
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

const envNameAllowed = "allowed: letters, digits and _, not starting with a digit, e.g. MY_VAR"

// CheckEnvName checks an environment variable's name: like MY_VAR, and not
// CSHARE_*, which cshare sets.
func CheckEnvName(k string) error {
	switch {
	case k == "":
		return fail("env", `""`, "is an empty name", envNameAllowed)
	case !envNameRE.MatchString(k):
		return fail("env", quote(k), "is not a variable name", envNameAllowed)
	case strings.HasPrefix(k, "CSHARE_"):
		return fail("env", quote(k), "is reserved", "CSHARE_* variables are set by cshare; choose another name")
	}
	return nil
}

// CheckEnv checks an environment's names (CheckEnvName) and values
// (CheckEnvValue), in sorted order, so every node names the same one.
func CheckEnv(env map[string]string) error {
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := CheckEnvName(k); err != nil {
			return err
		}
		if err := CheckEnvValue(k, env[k]); err != nil {
			return err
		}
	}
	return nil
}

// CheckEnvValue checks the value of variable k: UTF-8 without NUL (a NUL
// cannot reach a process's environment).
func CheckEnvValue(k, v string) error {
	if err := checkText(k+"'s value", v); err != nil {
		return fail("env", quote(v), err.Error(), textAllowed)
	}
	return nil
}

// ParseEnv reads NAME=VALUE pairs; a later NAME wins, as in docker run.
// Names and values are checked as CheckEnv checks them.
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
		if err := CheckEnvValue(k, v); err != nil {
			return nil, err
		}
		env[k] = v
	}
	return env, nil
}

// CheckSpecText checks that a spec's command and environment fit in one
// ledger entry: at most MaxSpecText bytes together. The error names the
// larger of the two (cmd or env).
func CheckSpecText(cmd []string, env map[string]string) error {
	var nc, ne int
	for _, a := range cmd {
		nc += len(a) + 1
	}
	for k, v := range env {
		ne += len(k) + len(v) + 2
	}
	if nc+ne <= MaxSpecText {
		return nil
	}
	field := "cmd"
	if ne > nc {
		field = "env"
	}
	return fail(field, fmt.Sprintf("%d bytes (command %d, env %d)", nc+ne, nc, ne),
		"is too large: the command and env of a job or contract hold at most "+strconv.Itoa(MaxSpecText)+" bytes together",
		"shorten --env or the command (give large inputs as a dataset)")
}

const imageAllowed = "allowed: a Docker image reference like busybox, ubuntu:24.04 or ghcr.io/org/app:v1, its repository in lower case, at most 256 characters"

// anchoredImageID is an image ID in full (64 hex digits), which Docker
// runs as it runs a name.
var anchoredImageID = regexp.MustCompile(`^[a-f0-9]{64}$`)

// CheckImage checks an image reference as Docker reads it (the
// distribution/reference parser Docker's client uses, so "../x" and
// "BusyBox:Latest" are refused here, not when a machine pulls it), or a
// full image ID.
func CheckImage(ref string) error {
	switch {
	case ref == "":
		return fail("image", `""`, "is empty", imageAllowed)
	case len(ref) > MaxImageLen:
		return fail("image", quote(ref), "is too long", imageAllowed)
	case anchoredImageID.MatchString(ref):
		return nil
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		problem := "is not an image reference"
		if _, lerr := reference.ParseNormalizedNamed(strings.ToLower(ref)); lerr == nil {
			problem = "has upper-case letters where Docker takes lower case only"
		}
		return fail("image", quote(ref), problem, imageAllowed)
	}
	return nil
}

// Bounds of the item timeout, in ms.
const (
	MinItemTimeoutMS = 1000                   // 1s
	MaxItemTimeoutMS = 366 * 24 * 3600 * 1000 // a year
)

const itemTimeoutAllowed = "allowed: a duration like 90s, 30m or 2h, from 1s to 8784h (a year), or 0 for none"

// FormatMS renders ms as a Go duration, as a user writes it: 90000 is
// "1m30s".
func FormatMS(ms int64) string {
	if ms > math.MaxInt64/int64(time.Millisecond) || ms < math.MinInt64/int64(time.Millisecond) {
		return strconv.FormatInt(ms, 10) + "ms"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// ParseItemTimeout reads an item timeout (a Go duration: "90s", "2h"; "0"
// or "none" for none) into ms, rounded up to whole ms.
func ParseItemTimeout(field, s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "0" || s == "none" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fail(field, quote(s), "is not a duration", itemTimeoutAllowed)
	}
	ms := int64((d + time.Millisecond - 1) / time.Millisecond)
	if d <= 0 {
		return 0, fail(field, clip(s), below("1s"), itemTimeoutAllowed)
	}
	return ms, Rename(CheckItemTimeoutMS(ms), field)
}

// CheckItemTimeoutMS checks an item timeout in ms: 0 (none) or
// MinItemTimeoutMS..MaxItemTimeoutMS.
func CheckItemTimeoutMS(ms int64) error {
	if ms == 0 {
		return nil
	}
	return inRange("item_timeout", ms, MinItemTimeoutMS, MaxItemTimeoutMS, FormatMS, itemTimeoutAllowed)
}

const diskAllowed = "allowed: a size like 512m, 20g or 1TiB, from 1 MiB to 16 TiB"

// ParseDisk reads the disk an instance may fill (its container's writable
// layer or its work directory: "20g") into MB.
func ParseDisk(s string) (int64, error) { return parseSizeMB("disk", s, diskAllowed) }

// parseSizeMB is ParseSizeMB of a size of at least 1 MiB, errors naming
// field and allowed.
func parseSizeMB(field, s, allowed string) (int64, error) {
	mb, err := ParseSizeMB(field, s)
	if err != nil {
		e := err.(*Error)
		return 0, fail(field, e.Value, e.Problem, allowed)
	}
	if mb < 1 {
		return 0, fail(field, clip(strings.TrimSpace(s)), below("1 MiB"), allowed)
	}
	return mb, nil
}

// CheckDiskMB checks disk per instance in MB: 0 (none asked) or
// 1..MaxMemoryMB.
func CheckDiskMB(mb int64) error {
	if mb == 0 {
		return nil
	}
	return inRange("disk", mb, 1, MaxMemoryMB, FormatMB, diskAllowed)
}

const gpuMemoryAllowed = "allowed: a size like 16g or 80GiB, from 1 MiB to 16 TiB, with --gpus 1 or more"

// ParseGPUMemory reads the least memory a GPU given to an instance must
// have ("24g") into MB.
func ParseGPUMemory(s string) (int64, error) { return parseSizeMB("gpu_memory", s, gpuMemoryAllowed) }

// CheckGPUMemoryMB checks the least memory per GPU in MB: 0 (any GPU) or
// 1..MaxMemoryMB, and only with gpus > 0.
func CheckGPUMemoryMB(mb, gpus int64) error {
	if mb == 0 {
		return nil
	}
	if gpus <= 0 {
		return fail("gpu_memory", FormatMB(mb), "asks for GPU memory of a job that asks for no GPU", gpuMemoryAllowed)
	}
	return inRange("gpu_memory", mb, 1, MaxMemoryMB, FormatMB, gpuMemoryAllowed)
}
