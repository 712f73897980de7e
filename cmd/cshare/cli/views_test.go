package cli

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cshare/cshare/internal/userkey"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/views.golden from the CLI's output")

// TestViewsGolden pins the output of the commands that print a value
// (human and --json), their --help, and their usage errors with no node
// running (a flag checked before the node is dialled), byte for byte.
func TestViewsGolden(t *testing.T) {
	var b strings.Builder
	record := func(args []string, r result, repl ...string) {
		rp := strings.NewReplacer(repl...)
		fmt.Fprintf(&b, "$ cshare %q\nexit %d\n--- stdout\n%s--- stderr\n%s\n", args, r.code, rp.Replace(r.stdout), rp.Replace(r.stderr))
	}
	withNode := func(args ...string) {
		n := startNode(t)
		for _, a := range args {
			if a == "$TMPFILE" {
				writeFile(t, filepath.Join(n.dataDir, "data.bin"), "some bytes")
			}
		}
		full := make([]string, len(args))
		for i, a := range args {
			full[i] = strings.ReplaceAll(a, "$TMPFILE", filepath.Join(n.dataDir, "data.bin"))
		}
		record(args, n.run(full...), n.dataDir, "$DATA")
	}
	noNode := func(args ...string) {
		dir := t.TempDir()
		record(append([]string{"(no node)"}, args...), inDir(dir, args...), dir, "$DATA")
	}
	for _, j := range []string{"", "--json"} {
		for _, args := range [][]string{
			{"node", "status"},
			{"org", "show"},
			{"org", "usage", "--until", "2026-01-02"},
			{"org", "key"},
			{"org", "key", "--rotate"},
			{"org", "create", "--name", "acme2", "--description", "two"},
			{"org", "invite"},
			{"org", "invite", "--role", "admin", "--uses", "0", "--expires", "never"},
			{"org", "set", "smartshare.mode=none", "description=one\ntwo"},
			{"org", "transfer", "--to", "bob"},
			{"org", "export-history", "--out", "/tmp/history.bin"},
			{"node", "join", "--org-key", orgKey, "--name", "laptop"},
			{"member", "join", "--invite", invite},
			{"contract", "create", "0123456789abcdef", "--image", "img", "--", "true"},
			{"offer", "create", "--price", "1.5"},
			{"job", "submit", "--name", "x", "--range", "1-10", "--", "echo", "hi"},
			{"job", "submit", "--", "true"},
			{"job", "submit", "--gpus", "2", "--", "true"},
			{"dataset", "add", "$TMPFILE", "--name", "d1"},
			{"dataset", "import", "$TMPFILE", "--name", "d2"},
		} {
			if j != "" {
				args = append(args[:len(args):len(args)], j)
			}
			withNode(args...)
		}
		goVersion := runtime.Version()
		r := runCLI(append([]string{"version"}, strings.Fields(j)...)...)
		record([]string{"version", j}, r, goVersion, "$GO", runtime.GOOS+"/"+runtime.GOARCH, "$PLATFORM")

		dir := t.TempDir()
		for _, args := range [][]string{{"user", "init", "--name", "alice"}, {"user", "show"}} {
			r := inDir(dir, append(args, strings.Fields(j)...)...)
			k, err := userkey.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			record(append(args, j), r, dir, "$DATA", k.ID, "$ID")
		}
		os.Remove(userkey.Path(dir))
	}
	for _, args := range [][]string{
		{"org", "create"},
		{"org", "create", "--name", "a\x00b"},
		{"org", "invite", "--role", "king"},
		{"org", "invite", "--uses", "-1"},
		{"org", "set", "nokey"},
		{"org", "transfer"},
		{"org", "export-history", "--out", " "},
		{"node", "join"},
		{"node", "join", "--org-key", "k", "--name", "a\x00b"},
		{"member", "join"},
		{"contract", "create", "x"},
		{"contract", "create", "x", "--image", "img", "--gpus", "-1"},
		{"offer", "create"},
		{"offer", "create", "--price", "1", "--until", "2026-01-01", "--for", "1h"},
		{"job", "submit", "--range", "x", "--", "true"},
		{"job", "submit", "--dataset", "x", "--", "true"},
		{"node", "status"},
		{"org", "show", "--json"},
		{"org", "key"},
		{"user", "show"},
		{"dataset", "add", "x"},
		{"dataset", "import", "x"},
	} {
		noNode(args...)
	}
	for _, args := range [][]string{
		{"node", "status"}, {"org", "show"}, {"org", "key"}, {"org", "create"}, {"org", "invite"}, {"org", "set"},
		{"org", "transfer"}, {"org", "export-history"}, {"node", "join"}, {"member", "join"}, {"contract", "create"}, {"offer", "create"},
		{"job", "submit"}, {"dataset", "add"}, {"dataset", "import"}, {"version"}, {"user", "init"}, {"user", "show"},
		{"smartshare", "plan"},
	} {
		record(append(args, "--help"), runCLI(append(args, "--help")...))
	}

	path := filepath.Join("testdata", "views.golden")
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestViewsGolden -update to write it)", err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < min(len(gl), len(wl)); i++ {
			if gl[i] != wl[i] {
				t.Fatalf("output differs from %s at line %d:\ngot  %q\nwant %q", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("output differs from %s in length: %d lines, want %d", path, len(gl), len(wl))
	}
}
