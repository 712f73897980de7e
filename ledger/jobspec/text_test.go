package jobspec

import (
	"strings"
	"testing"
)

// TestCheckCmdRefusesNULAndBadUTF8: a command word with a NUL byte or
// bytes that are not UTF-8 is refused, naming the word and the byte, as the
// API gets it (JSON would otherwise turn the bad byte into U+FFFD).
func TestCheckCmdRefusesNULAndBadUTF8(t *testing.T) {
	for _, c := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"sh", "-c", "echo a\x00b"}, `"echo a\x00b" (word 3 of the command) holds a NUL byte at byte 6`},
		{[]string{"echo", "ok\xff"}, `"ok\xff" (word 2 of the command) is not valid UTF-8 at byte 2`},
		{[]string{"\x00"}, "holds a NUL byte at byte 0"},
	} {
		wantErr(t, strings.Join(c.cmd, " "), CheckCmd(c.cmd), "cmd", c.want)
	}
	if err := CheckCmd([]string{"echo", "工作 🟢", "a\tb\nc"}); err != nil {
		t.Errorf("UTF-8 words with tabs and newlines: %v", err)
	}
}

// TestEnvRefusesNULAndBadUTF8: an env value with a NUL byte or invalid
// UTF-8 is refused by CheckEnv (the fold's and the API's check) and by
// ParseEnv (the CLI's).
func TestEnvRefusesNULAndBadUTF8(t *testing.T) {
	for _, v := range []string{"a\x00b", "\xc3", "ok\xff\xfe"} {
		wantErr(t, "CheckEnv", CheckEnv(map[string]string{"OK": "1", "X": v}), "env", "X's value")
		_, err := ParseEnv([]string{"X=" + v})
		wantErr(t, "ParseEnv", err, "env", "X's value")
	}
	wantErr(t, "bad name", CheckEnv(map[string]string{"1X": "v"}), "env", "is not a variable name")
	if err := CheckEnv(map[string]string{"A": "工作\n", "B": ""}); err != nil {
		t.Errorf("UTF-8 values: %v", err)
	}
}

// TestCheckImage: an image reference is read as Docker reads it; a
// contract and a job are checked by this one function.
func TestCheckImage(t *testing.T) {
	for _, ok := range []string{"busybox", "busybox:latest", "ubuntu:24.04", "ghcr.io/org/app:v1",
		"localhost:5000/x/y:Tag_1", "cshare-test:latest", "busybox@sha256:" + strings.Repeat("a", 64),
		strings.Repeat("a", 64)} {
		if err := CheckImage(ok); err != nil {
			t.Errorf("CheckImage(%q) = %v", ok, err)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"../x", `"../x" is not an image reference`},
		{"BusyBox:Latest", `"BusyBox:Latest" has upper-case letters`},
		{"", `"" is empty`},
		{"busy box", "is not an image reference"},
		{"a\x1bb", `"a\x1bb" is not an image reference`},
		{strings.Repeat("x", 10240), `"` + strings.Repeat("x", 64) + `…" (10240 bytes) is too long`},
	} {
		err := CheckImage(c.in)
		wantErr(t, c.in, err, "image", c.want)
		if err != nil && len(err.Error()) > 400 {
			t.Errorf("CheckImage(%.20q): a message of %d bytes", c.in, len(err.Error()))
		}
	}
}

// TestEchoIsCut: a bad value is echoed at most 64 characters long, whatever
// its length, by every parser.
func TestEchoIsCut(t *testing.T) {
	long := strings.Repeat("9", 10000)
	for name, err := range map[string]error{
		"memory":   second(ParseMemory(long + "x")),
		"priority": second(ParsePriority(long)),
		"cores":    second(ParseCores(long)),
		"range":    third(ParseRange(long)),
		"env":      second(ParseEnv([]string{strings.Repeat("A", 10000)})),
		"driver":   CheckDriver(long),
		"cmd":      CheckCmd([]string{strings.Repeat(" ", 10000)}),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if n := len(err.Error()); n > 300 || strings.Contains(err.Error(), strings.Repeat("9", 65)) {
			t.Errorf("%s: %d bytes: %.120s", name, n, err)
		}
	}
}

func second[T any](_ T, err error) error        { return err }
func third[T, U any](_ T, _ U, err error) error { return err }

// TestCheckSpecText: a command and env too large for one ledger entry are
// refused naming the larger field and the flag to shorten, not as "entry
// too large".
func TestCheckSpecText(t *testing.T) {
	if err := CheckSpecText([]string{"sh", "-c", strings.Repeat("x", 1000)}, map[string]string{"A": "b"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for i := range 25 {
		env["V"+strings.Repeat("X", i)] = strings.Repeat("v", 4000)
	}
	wantErr(t, "env", CheckSpecText([]string{"true"}, env), "env", "shorten --env or the command")
	wantErr(t, "cmd", CheckSpecText([]string{"echo", strings.Repeat("x", 100000)}, nil), "cmd", "100006 bytes (command 100006, env 0) is too large")
}
