package runtime

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExecEnter: a process entered beside an exec run has the run's work
// dir and environment, its output and exit code, and with a TTY a
// terminal of its size; an ended run cannot be entered.
func TestExecEnter(t *testing.T) {
	root := t.TempDir()
	stopAll(t, root)
	e, _ := newTestExec(t, root)
	ctx := waitCtx(t)
	id, err := e.Start(ctx, execSpec(5, "sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	p, err := e.Enter(ctx, id, Process{Cmd: []string{"/bin/sh", "-c", "pwd; echo $CSHARE_ITEM $EXTRA; cat; echo e >&2; exit 4"}, Env: []string{"EXTRA=x"}},
		Stdio{Stdin: strings.NewReader("in\n"), Stdout: &out, Stderr: &errb})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(ctx)
	if err != nil || code != 4 {
		t.Fatalf("exit %d, %v", code, err)
	}
	wd := filepath.Join(root, "instances", "inst-1")
	if out.String() != wd+"\n5 x\nin\n" || errb.String() != "e\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
	_ = p.Close(time.Second)

	out.Reset()
	tp, err := e.Enter(ctx, id, Process{Cmd: []string{"/bin/sh", "-c", "tty; stty size; exit 2"}, TTY: true, Cols: 100, Rows: 30},
		Stdio{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := tp.Wait(ctx); err != nil || code != 2 {
		t.Fatalf("tty exit %d, %v", code, err)
	}
	if !strings.Contains(out.String(), "/dev/pts/") || !strings.Contains(out.String(), "30 100") {
		t.Fatalf("tty output %q", out.String())
	}
	_ = tp.Close(time.Second)

	// Copy in and out of its work dir.
	var arch bytes.Buffer
	tw := tar.NewWriter(&arch)
	_ = tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755})
	_ = tw.WriteHeader(&tar.Header{Name: "d/f.txt", Typeflag: tar.TypeReg, Mode: 0o640, Size: 5})
	_, _ = tw.Write([]byte("hello"))
	_ = tw.Close()
	if err := e.CopyTo(ctx, id, ".", &arch); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(wd, "d", "f.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("copied in: %q %v", b, err)
	}
	rc, st, err := e.CopyFrom(ctx, id, "d")
	if err != nil || !st.Dir || st.Name != "d" {
		t.Fatalf("copy from: %+v %v", st, err)
	}
	tr := tar.NewReader(rc)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	rc.Close()
	if strings.Join(names, ",") != "d/,d/f.txt" {
		t.Fatalf("archive names %v", names)
	}
	var evil bytes.Buffer
	tw = tar.NewWriter(&evil)
	_ = tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Mode: 0o600, Size: 1})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	if err := e.CopyTo(ctx, id, ".", &evil); err == nil || !strings.Contains(err.Error(), "leaves the destination") {
		t.Fatalf("an entry outside the directory: %v", err)
	}

	if err := e.Stop(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Enter(ctx, id, Process{Cmd: []string{"true"}}, Stdio{Stdout: io.Discard}); err == nil {
		t.Fatal("entered an ended run")
	}
}
