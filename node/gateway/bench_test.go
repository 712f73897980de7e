package gateway

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkSSHPrompt is the time from starting `ssh -tt` (Debian's OpenSSH
// client) to the shell's prompt through the gateway, beside `docker exec
// -i CONTAINER sh -i` to the prompt of the same container, alternating,
// in one run. Each iteration is one of each; with -benchtime 20x the
// reported p50s are over 20:
//
//	go test -run '^$' -bench BenchmarkSSHPrompt -benchtime 20x ./node/gateway/
func BenchmarkSSHPrompt(b *testing.B) {
	w := newWorld(b)
	id := w.contract("alice", "sleep", "3600")
	container := "cshare-contract-" + id + "-" + testMachine[max(0, len(testMachine)-8):]
	var sshT, dockerT []time.Duration
	for b.Loop() {
		sshT = append(sshT, toPrompt(b, "ssh", append(w.sshArgs(w.keys["alice"], id, "-tt"), "sh -i")...))
		dockerT = append(dockerT, toPrompt(b, "docker", "exec", "-i", container, "sh", "-i"))
	}
	b.ReportMetric(p50(sshT), "ssh-p50-ms")
	b.ReportMetric(p50(dockerT), "docker-exec-p50-ms")
	b.ReportMetric(0, "ns/op")
}

// toPrompt runs name args, an interactive shell, and times it until its
// prompt ("# ") shows on its stdout or stderr; then it ends the shell.
func toPrompt(b *testing.B, name string, args ...string) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	in, _ := c.StdinPipe()
	pr, pw := io.Pipe()
	c.Stdout, c.Stderr = pw, pw
	start := time.Now()
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	seen := make(chan time.Duration, 1)
	go func() {
		r := bufio.NewReader(pr)
		var got strings.Builder
		for {
			c, err := r.ReadByte()
			if err != nil {
				return
			}
			got.WriteByte(c)
			if strings.HasSuffix(got.String(), "# ") {
				seen <- time.Since(start)
				_, _ = io.Copy(io.Discard, r)
				return
			}
		}
	}()
	var d time.Duration
	select {
	case d = <-seen:
	case <-ctx.Done():
		b.Fatalf("%s: no prompt", name)
	}
	_, _ = in.Write([]byte("exit\n"))
	_ = in.Close()
	_ = c.Wait()
	_ = pw.Close()
	return d
}

func p50(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Millisecond)
}
