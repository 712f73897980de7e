package jobspec

import (
	"errors"
	"strings"
	"testing"
)

// wantErr checks that err is one line naming the field and holding want.
func wantErr(t *testing.T, what string, err error, field, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one with %q", what, want)
	}
	var e *Error
	if !errors.As(err, &e) || e.Field != field {
		t.Errorf("%s: %v is not an *Error of field %q", what, err, field)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, field+": ") || !strings.Contains(msg, want) {
		t.Errorf("%s: %q: want one line %q... containing %q", what, msg, field+": ", want)
	}
}

func TestParseCores(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string
	}{
		{"", 0, `"" is not a number`},
		{"2", 2000, ""},
		{"0.5", 500, ""},
		{" 0.25 ", 250, ""},
		{"0.001", 1, ""},
		{"0.0015", 2, ""}, // to the nearest millicore
		{"0.0014", 1, ""},
		{"4096", 4096000, ""},
		{"1.23456", 1235, ""},
		{"0.0001", 0, "0.0001 is below the minimum 0.001; allowed: 0.001 to 4096 cores"},
		{"0.0004", 0, "below the minimum 0.001"},
		{"1000", 1000000, ""},
		{"4097", 0, "4097 is above the maximum 4096"},
		{"1e9", 0, "1000000000 is above the maximum 4096"},
		{"1e300", 0, "1e300 is above the maximum 4096"},
		{"0", 0, "0 is below the minimum 0.001"},
		{"-1", 0, "-1 is below the minimum 0.001"},
		{"many", 0, `"many" is not a number`},
		{"NaN", 0, "not a number"},
		{"Inf", 0, "not a number"},
	} {
		got, err := ParseCores(c.in)
		if c.err != "" {
			wantErr(t, c.in, err, "cores", c.err)
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseCores(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, m := range []int64{-1, MaxCoresMilli + 1} {
		wantErr(t, "check", CheckCores(m), "cores", "0.001 to 4096 cores")
	}
}

func TestParseMemory(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string
	}{
		{"", 0, `"" is not a size`},
		{"512m", 512, ""},
		{"64MiB", 64, ""},
		{"4MB", 4, ""},
		{"2g", 2048, ""},
		{"2GiB", 2048, ""},
		{"1.5g", 1536, ""},
		{"4097k", 5, ""}, // rounded up to whole MB
		{"16t", 16 << 20, ""},
		{"16TiB", 16 << 20, ""},
		{"3m", 0, "3 MiB is below the minimum 4 MiB"},
		{"0", 0, "0 is below the minimum 4 MiB"},
		{"100", 0, "1 MiB is below the minimum 4 MiB"},
		{"1024", 0, "below the minimum"}, // bytes, as Docker reads it
		{"16.001t", 0, "16778265 MiB is above the maximum 16 TiB"},
		{"17179869184g", 0, "16 EiB is above the maximum 16 TiB"},
		{"99999999999999999999PB", 0, "above the maximum"},
		{"lots", 0, `"lots" is not a size`},
		{"-1g", 0, "not a size"},
		{"4XB", 0, "not a size"},
		{"5g\n\x9f", 0, `"5g\n\x9f" is not a size`}, // go-units alone reads 5g
		{"0p\n\x9f", 0, `"0p\n\x9f" is not a size`},
	} {
		got, err := ParseMemory(c.in)
		if c.err != "" {
			wantErr(t, c.in, err, "memory", c.err)
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if err := CheckMemoryMB(got); err != nil {
			t.Errorf("CheckMemoryMB(%d): %v", got, err)
		}
	}
	for _, m := range []int64{-1, 3, MaxMemoryMB + 1} {
		wantErr(t, "check", CheckMemoryMB(m), "memory", "from 4 MiB to 16 TiB")
	}
	if got := BytesToMB(1<<20 + 1); got != 2 {
		t.Errorf("BytesToMB(1MiB+1) = %d", got)
	}
}

func TestParseRange(t *testing.T) {
	for _, c := range []struct {
		in         string
		start, end int64
		err        string
	}{
		{"1-100", 1, 100, ""},
		{"7", 7, 7, ""},
		{" 0-0 ", 0, 0, ""},
		{"1-1000000", 1, 1000000, ""},
		{"0-1000000", 0, 0, "0-1000000 has 1000001 items, above the maximum 1000000"},
		{"5-1", 0, 0, "5-1 is empty; the start must not exceed the end"},
		{"a-b", 0, 0, "not a range"},
		{"1-", 0, 0, "not a range"},
		{"-3", 0, 0, "not a range"},
		{"", 0, 0, "not a range"},
		{"1-99999999999999999999", 0, 0, "above the maximum 9223372036854775807"},
	} {
		s, e, err := ParseRange(c.in)
		if c.err != "" {
			wantErr(t, c.in, err, "range", c.err)
			continue
		}
		if err != nil || s != c.start || e != c.end {
			t.Errorf("ParseRange(%q) = %d, %d, %v", c.in, s, e, err)
		}
	}
	for _, r := range [][2]int64{{-1, 2}, {-1 << 63, 1<<63 - 1}, {3, 2}} {
		wantErr(t, "check", CheckRange(r[0], r[1]), "range", "")
	}
}

func TestScalars(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string
	}{
		{"*", -1, ""}, {"-1", -1, ""}, {"0", 0, ""}, {"50", 50, ""}, {"1048576", 1 << 20, ""},
		{"-2", 0, "-2 is below the minimum -1"}, {"1048577", 0, "1048577 is above the maximum 1048576"}, {"lots", 0, `"lots" is not a number`},
	} {
		got, err := ParseMaxCPUs(c.in)
		if c.err != "" {
			wantErr(t, c.in, err, "max_cpus", c.err)
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseMaxCPUs(%q) = %d, %v", c.in, got, err)
		}
	}
	if FormatMaxCPUs(-1) != "*" || FormatMaxCPUs(5) != "5" {
		t.Error("FormatMaxCPUs")
	}
	for _, p := range []int64{1, 5, 9999} {
		if err := CheckPriority(p); err != nil {
			t.Errorf("priority %d: %v", p, err)
		}
	}
	for _, p := range []int64{0, -1, 10000, 1e9} {
		wantErr(t, "priority", CheckPriority(p), "priority", "allowed: 1 (the highest) to 9999")
	}
	wantErr(t, "cpus", CheckCPUs(0), "cpus", "0 is below the minimum 1")
	wantErr(t, "gpus", CheckGPUs(65), "gpus", "65")
	wantErr(t, "retries", CheckRetries(-1), "retries", "0 to 100")
	wantErr(t, "driver", CheckDriver("podman"), "driver", `"podman"`)
	wantErr(t, "cmd", CheckCmd(nil), "cmd", "is empty")
	wantErr(t, "cmd", CheckCmd([]string{""}), "cmd", "not a program")
	wantErr(t, "cmd", CheckCmd([]string{" ", "x"}), "cmd", "not a program")
	if err := CheckCmd([]string{"true", ""}); err != nil {
		t.Error(err)
	}
}

func TestEnv(t *testing.T) {
	env, err := ParseEnv([]string{"A=1", "B=x=y", "A=2", "_x="})
	if err != nil || len(env) != 3 || env["A"] != "2" || env["B"] != "x=y" || env["_x"] != "" {
		t.Fatalf("ParseEnv = %v, %v", env, err)
	}
	for _, c := range []struct{ in, err string }{
		{"=x", `"" is an empty name`}, {"A", "not NAME=VALUE"}, {"1A=x", "not a variable name"},
		{"A B=x", "not a variable name"}, {"CSHARE_ITEM=1", "reserved"}, {"A\x00=1", "not a variable name"},
	} {
		_, err := ParseEnv([]string{c.in})
		wantErr(t, c.in, err, "env", c.err)
	}
}

func TestRename(t *testing.T) {
	_, err := ParseMemory("3m")
	if got := Rename(err, "--memory").Error(); got != "--memory: 3 MiB is below the minimum 4 MiB; "+sizeAllowed {
		t.Errorf("renamed: %q", got)
	}
	if _, ok := Rename(err, "--memory").(*Error); !ok {
		t.Error("Rename lost the type")
	}
	if e := errors.New("x"); Rename(e, "f") != e {
		t.Error("Rename changed a foreign error")
	}
}

// FuzzParsers: no parser panics; whatever a parser accepts, its Check
// accepts too (the API is never stricter than the CLI, nor looser); every
// error is one line naming its field.
func FuzzParsers(f *testing.F) {
	for _, s := range []string{"0.5", "0.0001", "1e9", "512m", "17179869184g", "1-100", "7", "*", "-1", "NaN", "1.5g", "0x1p4m", "A=1", "=x", "90s", "1ns", "9223372036s", "none"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		oneLine := func(field string, err error) {
			if err == nil {
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Field != field || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("%s %q: error %q", field, s, err)
			}
		}
		for _, c := range []struct {
			field   string
			parse   func(string) (int64, error)
			check   func(int64) error
			nonzero bool // the parser never gives 0 (which means "none")
		}{
			{"cores", ParseCores, CheckCores, true},
			{"memory", ParseMemory, CheckMemoryMB, true},
			{"item_timeout", parseItemTimeout, CheckItemTimeoutMS, false},
			{"disk", ParseDisk, CheckDiskMB, true},
			{"gpu_memory", ParseGPUMemory, func(mb int64) error { return CheckGPUMemoryMB(mb, 1) }, true},
		} {
			if v, err := c.parse(s); err == nil {
				if cerr := c.check(v); cerr != nil || (c.nonzero && v == 0) {
					t.Fatalf("%s %q -> %d, check %v", c.field, s, v, cerr)
				}
			} else {
				oneLine(c.field, err)
			}
		}
		if a, b, err := ParseRange(s); err == nil {
			if cerr := CheckRange(a, b); cerr != nil {
				t.Fatalf("range %q -> %d-%d, check %v", s, a, b, cerr)
			}
		} else {
			oneLine("range", err)
		}
		if n, err := ParseMaxCPUs(s); err == nil {
			if cerr := CheckMaxCPUs(n); cerr != nil {
				t.Fatalf("max_cpus %q -> %d, check %v", s, n, cerr)
			}
		} else {
			oneLine("max_cpus", err)
		}
		if env, err := ParseEnv([]string{s}); err == nil {
			for k := range env {
				if CheckEnvName(k) != nil {
					t.Fatalf("env %q accepted name %q", s, k)
				}
			}
		} else {
			oneLine("env", err)
		}
	})
}

func parseItemTimeout(s string) (int64, error) { return ParseItemTimeout("item_timeout", s) }

// TestParseWhole: counts are read as a user may write them, and a number
// out of range names the range, never strconv's text.
func TestParseWhole(t *testing.T) {
	for _, c := range []struct {
		parse func(string) (int64, error)
		field string
		in    string
		want  int64
		err   string
	}{
		{ParsePriority, "priority", "5", 5, ""},
		{ParsePriority, "priority", "1e3", 1000, ""},
		{ParsePriority, "priority", "1e9", 0, "priority: 1000000000 is above the maximum 9999; allowed: 1 (the highest) to 9999 (the lowest)"},
		{ParsePriority, "priority", "99999999999999999999999", 0, "99999999999999999999999 is above the maximum 9999"},
		{ParsePriority, "priority", "-99999999999999999999999", 0, "-99999999999999999999999 is below the minimum 1"},
		{ParsePriority, "priority", "0", 0, "0 is below the minimum 1"},
		{ParsePriority, "priority", "2.5", 0, "2.5 is not a whole number"},
		{ParsePriority, "priority", "high", 0, `"high" is not a number`},
		{ParseGPUs, "gpus", "65", 0, "65 is above the maximum 64"},
		{ParseCPUs, "cpus", "1e7", 0, "10000000 is above the maximum 1048576"},
		{ParseRetries, "retries", "101", 0, "101 is above the maximum 100"},
		{ParseMaxCPUs, "max_cpus", "1e30", 0, "1e30 is above the maximum 1048576"},
		{parseItemTimeout, "item_timeout", "90s", 90_000, ""},
		{parseItemTimeout, "item_timeout", " 2h ", 7_200_000, ""},
		{parseItemTimeout, "item_timeout", "1500us", 0, "2ms is below the minimum 1s"},
		{parseItemTimeout, "item_timeout", "none", 0, ""},
		{parseItemTimeout, "item_timeout", "0", 0, ""},
		{parseItemTimeout, "item_timeout", "-5s", 0, "-5s is below the minimum 1s"},
		{parseItemTimeout, "item_timeout", "10", 0, `"10" is not a duration`},
		{parseItemTimeout, "item_timeout", "9000h", 0, "9000h0m0s is above the maximum 8784h0m0s"},
		{ParseDisk, "disk", "20g", 20 << 10, ""},
		{ParseDisk, "disk", "1", 1, ""},
		{ParseDisk, "disk", "0", 0, "0 is below the minimum 1 MiB"},
		{ParseDisk, "disk", "lots", 0, `"lots" is not a size`},
		{ParseDisk, "disk", "17t", 0, "is above the maximum 16 TiB"},
		{ParseGPUMemory, "gpu_memory", "24GiB", 24 << 10, ""},
		{ParseGPUMemory, "gpu_memory", "x", 0, `"x" is not a size`},
	} {
		got, err := c.parse(c.in)
		if c.err != "" {
			wantErr(t, c.in, err, c.field, c.err)
			if err != nil && strings.Contains(err.Error(), "strconv") {
				t.Errorf("%s: %v", c.in, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s %q = %d, %v; want %d", c.field, c.in, got, err, c.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for m, want := range map[int64]string{1: "0.001", 500: "0.5", 2000: "2", 1250: "1.25", 4096000: "4096", -500: "-0.5"} {
		if got := FormatCores(m); got != want {
			t.Errorf("FormatCores(%d) = %q, want %q", m, got, want)
		}
	}
	for mb, want := range map[int64]string{1: "1 MiB", 512: "512 MiB", 1024: "1 GiB", 1536: "1.5 GiB", 1500: "1500 MiB", 4096: "4 GiB", 16 << 20: "16 TiB"} {
		if got := FormatMB(mb); got != want {
			t.Errorf("FormatMB(%d) = %q, want %q", mb, got, want)
		}
	}
	if got := FormatBytes(2048); got != "2 KiB" {
		t.Errorf("FormatBytes(2048) = %q", got)
	}
}

func TestCheckLimits(t *testing.T) {
	wantErr(t, "gpu memory without gpus", CheckGPUMemoryMB(1024, 0), "gpu_memory", "asks for GPU memory of a job that asks for no GPU")
	if err := CheckGPUMemoryMB(1024, 1); err != nil {
		t.Error(err)
	}
	wantErr(t, "timeout in ms", CheckItemTimeoutMS(999), "item_timeout", "999ms is below the minimum 1s")
}
