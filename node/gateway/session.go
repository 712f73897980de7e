package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cshare/cshare/runtime"
)

// A session channel (RFC 4254 §6): requests for a terminal and the
// environment, then one shell or command, run inside the target with the
// runtime's Enter; window changes while it runs; its exit status at the
// end. Anything else is answered no.

// loginShell starts the image's bash if it has one, else its sh, as a
// login shell.
const loginShell = `if command -v bash >/dev/null 2>&1; then exec bash -l; fi; exec sh -l`

// hangupGrace is how long a process whose client went away has between
// its hang-up and its kill.
const hangupGrace = 2 * time.Second

func (s *Service) session(ctx context.Context, e entry, sc *ssh.ServerConn, nch ssh.NewChannel) {
	ch, reqs, err := nch.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	var (
		pty      *ptyRequest
		env      []string
		proc     runtime.Proc
		command  string
		start    time.Time
		exited   = make(chan int, 1)
		procDone = make(chan struct{})
	)
	defer func() {
		if proc != nil {
			_ = proc.Close(hangupGrace)
			select {
			case <-procDone:
			case <-time.After(hangupGrace + 5*time.Second):
				// It did not end (this node may not signal it): its Wait
				// ends with the connection.
			}
		}
	}()
	reply := func(req *ssh.Request, ok bool) {
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case code := <-exited:
			_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
			s.d.Log.Info("ssh session", append(who(e, sc), "command", clipCmd(command), "pty", pty != nil,
				"exit", code, "duration", s.d.Now().Sub(start).Round(time.Millisecond).String())...)
			return
		case req, ok := <-reqs:
			if !ok {
				if proc != nil {
					s.d.Log.Info("ssh session ended by the client", append(who(e, sc), "command", clipCmd(command),
						"duration", s.d.Now().Sub(start).Round(time.Millisecond).String())...)
				}
				return // the client closed the channel, or went away
			}
			switch req.Type {
			case "pty-req":
				p, err := parsePty(req.Payload)
				if err != nil || proc != nil {
					reply(req, false)
					continue
				}
				pty = &p
				reply(req, true)
			case "env":
				kv, err := parseEnv(req.Payload)
				if err != nil || proc != nil || len(env) >= maxEnvVars {
					reply(req, false)
					continue
				}
				env = append(env, kv)
				reply(req, true)
			case "window-change":
				if cols, rows, err := parseWindowChange(req.Payload); err == nil && proc != nil && pty != nil {
					_ = proc.Resize(cols, rows)
				}
				reply(req, false) // wants no reply
			case "shell", "exec":
				if proc != nil {
					reply(req, false)
					continue
				}
				command = ""
				if req.Type == "exec" {
					c, err := parseExec(req.Payload)
					if err != nil {
						reply(req, false)
						continue
					}
					command = c
				}
				p := runtime.Process{Cmd: []string{"/bin/sh", "-c", loginShell}, Env: sessionEnv(e, pty, env)}
				if command != "" {
					p.Cmd = []string{"/bin/sh", "-c", command}
				}
				stdio := runtime.Stdio{Stdin: ch, Stdout: ch, Stderr: ch.Stderr()}
				if pty != nil {
					p.TTY, p.Cols, p.Rows = true, uint16(pty.Cols), uint16(pty.Rows)
				}
				start = s.d.Now()
				pr, err := s.enter(ctx, e, p, stdio)
				reply(req, true)
				if err != nil {
					// Said on the session's stderr, with exit status 255
					// as OpenSSH's own failures: the client's "request
					// failed" would say nothing.
					fmt.Fprintf(ch.Stderr(), "cshare: %v\r\n", err)
					exited <- 255
					continue
				}
				proc = pr
				go func() {
					defer close(procDone)
					code, err := pr.Wait(ctx)
					if err != nil {
						code = 255
					}
					exited <- code
				}()
			default:
				// signal, subsystem (sftp), x11-req, auth-agent-req,
				// keepalive@openssh.com...: no.
				reply(req, false)
			}
		}
	}
}

// enter starts p in the connection's run, as authentication found it; if
// that run is gone (a contract's instance made again), in the one there
// is now.
func (s *Service) enter(ctx context.Context, e entry, p runtime.Process, stdio runtime.Stdio) (runtime.Proc, error) {
	if d, ok := s.d.Drivers.Get(e.Driver); ok {
		if en, ok := d.(runtime.Enterer); ok {
			pr, err := en.Enter(ctx, e.Run, p, stdio)
			if !errors.Is(err, runtime.ErrNotFound) {
				return pr, err
			}
		}
	}
	en, run, err := s.findRun(ctx, e.Grant)
	if err != nil {
		return nil, err
	}
	return en.Enter(ctx, run, p, stdio)
}

// sessionEnv is a session's environment: the client's variables, TERM
// from its terminal request, and the CSHARE_* ones, which win.
func sessionEnv(e entry, pty *ptyRequest, client []string) []string {
	env := append([]string(nil), client...)
	if pty != nil && pty.Term != "" {
		env = append(env, "TERM="+pty.Term)
	}
	return append(env, e.Env...)
}
