package gateway

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
)

// The payloads of the requests a client sends (RFC 4254), read and
// checked before anything acts on them. Each parser takes the bytes as
// they came and never panics (FuzzRequests).

// Bounds of what a client may send.
const (
	maxCommand  = 64 << 10 // an exec request's command
	maxEnvName  = 128
	maxEnvValue = 4096
	maxEnvVars  = 64 // per session
	maxTerm     = 64
	maxTermSize = 10000 // columns or rows
)

// ptyRequest is a "pty-req" (RFC 4254 §6.2).
type ptyRequest struct {
	Term          string
	Cols, Rows    uint32
	Width, Height uint32
	Modes         string
}

// parsePty reads a pty-req: a terminal name of printable ASCII and a size
// within maxTermSize (0 means the client does not say: 80x24).
func parsePty(b []byte) (ptyRequest, error) {
	var p ptyRequest
	if err := ssh.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("pty-req: %v", err)
	}
	if len(p.Term) > maxTerm || strings.IndexFunc(p.Term, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
		return p, fmt.Errorf("pty-req: terminal name %q; allowed: up to %d printable ASCII characters", clip(p.Term), maxTerm)
	}
	if p.Cols > maxTermSize || p.Rows > maxTermSize {
		return p, fmt.Errorf("pty-req: %dx%d; allowed: up to %dx%d", p.Cols, p.Rows, maxTermSize, maxTermSize)
	}
	if p.Cols == 0 {
		p.Cols = 80
	}
	if p.Rows == 0 {
		p.Rows = 24
	}
	return p, nil
}

// parseWindowChange reads a "window-change" (RFC 4254 §6.7).
func parseWindowChange(b []byte) (cols, rows uint16, err error) {
	var w struct{ Cols, Rows, Width, Height uint32 }
	if err := ssh.Unmarshal(b, &w); err != nil {
		return 0, 0, fmt.Errorf("window-change: %v", err)
	}
	if w.Cols == 0 || w.Rows == 0 || w.Cols > maxTermSize || w.Rows > maxTermSize {
		return 0, 0, fmt.Errorf("window-change: %dx%d; allowed: 1x1 to %dx%d", w.Cols, w.Rows, maxTermSize, maxTermSize)
	}
	return uint16(w.Cols), uint16(w.Rows), nil
}

// parseEnv reads an "env" request (RFC 4254 §6.4): a name of letters,
// digits and _ not starting with a digit, other than CSHARE_* (the
// gateway sets those), and a value of UTF-8 without NUL. It returns
// NAME=VALUE.
func parseEnv(b []byte) (string, error) {
	var e struct{ Name, Value string }
	if err := ssh.Unmarshal(b, &e); err != nil {
		return "", fmt.Errorf("env: %v", err)
	}
	if !envName(e.Name) {
		return "", fmt.Errorf("env: name %q; allowed: letters, digits and _, not starting with a digit, at most %d", clip(e.Name), maxEnvName)
	}
	if strings.HasPrefix(e.Name, "CSHARE_") {
		return "", fmt.Errorf("env: %s is set by cshare", e.Name)
	}
	if len(e.Value) > maxEnvValue || strings.ContainsRune(e.Value, 0) || !utf8.ValidString(e.Value) {
		return "", fmt.Errorf("env: the value of %s; allowed: UTF-8 without NUL, at most %d bytes", e.Name, maxEnvValue)
	}
	return e.Name + "=" + e.Value, nil
}

func envName(n string) bool {
	if n == "" || len(n) > maxEnvName || (n[0] >= '0' && n[0] <= '9') {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// parseExec reads an "exec" request's command (RFC 4254 §6.5): UTF-8
// without NUL, at most maxCommand bytes.
func parseExec(b []byte) (string, error) {
	var e struct{ Command string }
	if err := ssh.Unmarshal(b, &e); err != nil {
		return "", fmt.Errorf("exec: %v", err)
	}
	if e.Command == "" || len(e.Command) > maxCommand || strings.ContainsRune(e.Command, 0) || !utf8.ValidString(e.Command) {
		return "", fmt.Errorf("exec: a command of %d bytes; allowed: 1 to %d bytes of UTF-8 without NUL", len(e.Command), maxCommand)
	}
	return e.Command, nil
}

// forwardRequest is a "direct-tcpip" channel's payload (RFC 4254 §7.2).
type forwardRequest struct {
	Host     string
	Port     uint32
	OrigHost string
	OrigPort uint32
}

// errNotInside refuses a forward to anywhere but the container itself.
var errNotInside = errors.New("direct-tcpip: only ports inside the container: -L LOCAL:localhost:PORT")

// parseForward reads a direct-tcpip payload: a port of the container,
// named as localhost, 127.0.0.1 or ::1 (its own loopback, as a process
// inside it names it).
func parseForward(b []byte) (forwardRequest, error) {
	var f forwardRequest
	if err := ssh.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("direct-tcpip: %v", err)
	}
	if f.Port < 1 || f.Port > 65535 {
		return f, fmt.Errorf("direct-tcpip: port %d; allowed: 1..65535", f.Port)
	}
	h := strings.ToLower(f.Host)
	if h != "localhost" {
		ip := net.ParseIP(strings.Trim(h, "[]"))
		if ip == nil || !ip.IsLoopback() {
			return f, errNotInside
		}
	}
	return f, nil
}

func clip(s string) string {
	if len(s) > 32 {
		s = s[:32] + "..."
	}
	return s
}
