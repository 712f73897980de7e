package gateway

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
)

// FuzzRequests: what a client sends before anything acts on it (its user
// name, and the payloads of pty-req, window-change, env, exec and
// direct-tcpip) is read without a panic, and what is accepted is within
// the gateway's bounds.
func FuzzRequests(f *testing.F) {
	f.Add("c0123456789ab", ssh.Marshal(ptyRequest{Term: "xterm", Cols: 80, Rows: 24}))
	f.Add("job.3", ssh.Marshal(struct{ Cols, Rows, W, H uint32 }{132, 50, 0, 0}))
	f.Add("train.v2.7", ssh.Marshal(struct{ Name, Value string }{"LANG", "C.UTF-8"}))
	f.Add("a b", ssh.Marshal(struct{ Command string }{"echo hi"}))
	f.Add(".1", ssh.Marshal(forwardRequest{Host: "localhost", Port: 8080, OrigHost: "127.0.0.1", OrigPort: 5555}))
	f.Add("x.-1", []byte{0, 0, 0, 5, 'x'})
	f.Add("", []byte{})
	f.Fuzz(func(t *testing.T, user string, payload []byte) {
		if tg, err := ParseUser(user); err == nil {
			if len(user) > MaxUser || tg.Ref == "" || strings.ContainsAny(tg.Ref, " @/:") || tg.String() != user {
				t.Fatalf("accepted user %q as %+v", user, tg)
			}
			if tg.Job && tg.Item < 0 {
				t.Fatalf("accepted a negative item: %q", user)
			}
		}
		if p, err := parsePty(payload); err == nil {
			if p.Cols == 0 || p.Rows == 0 || p.Cols > maxTermSize || p.Rows > maxTermSize || len(p.Term) > maxTerm {
				t.Fatalf("accepted pty %+v", p)
			}
		}
		if c, r, err := parseWindowChange(payload); err == nil && (c == 0 || r == 0 || c > maxTermSize || r > maxTermSize) {
			t.Fatalf("accepted window %dx%d", c, r)
		}
		if kv, err := parseEnv(payload); err == nil {
			name, value, ok := strings.Cut(kv, "=")
			if !ok || !envName(name) || strings.HasPrefix(name, "CSHARE_") || strings.ContainsRune(value, 0) || !utf8.ValidString(value) {
				t.Fatalf("accepted env %q", kv)
			}
		}
		if c, err := parseExec(payload); err == nil && (c == "" || len(c) > maxCommand || strings.ContainsRune(c, 0)) {
			t.Fatalf("accepted command %q", c)
		}
		if fw, err := parseForward(payload); err == nil && (fw.Port == 0 || fw.Port > 65535) {
			t.Fatalf("accepted forward %+v", fw)
		}
	})
}

// FuzzArchiveRequest: an ArchiveProtocol stream's first bytes (a frame and
// the request in it) are read without a panic, within maxArchiveFrame, and
// an accepted request has an org, an ID and a path of one line.
func FuzzArchiveRequest(f *testing.F) {
	var b strings.Builder
	_ = writeFrame(&b, archiveRequest{Org: "o", ID: "c0123", Path: "/root", Put: true})
	f.Add([]byte(b.String()))
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		frame, err := readFrame(strings.NewReader(string(in)))
		if err != nil {
			return
		}
		if len(frame) > maxArchiveFrame {
			t.Fatalf("a frame of %d bytes", len(frame))
		}
		req, err := decodeArchiveRequest(frame)
		if err != nil {
			return
		}
		if req.Org == "" || req.ID == "" || req.Path == "" || strings.ContainsAny(req.Path, "\x00\n\r") || req.Item < 0 {
			t.Fatalf("accepted %+v", req)
		}
	})
}
