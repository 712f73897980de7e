package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cshare/cshare/internal/text"
	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/runtime"
)

// The listener and its connections: the handshake, authentication against
// the ledger at this moment, and the channels of one connection.

// grantExt is the Permissions extension that carries a connection's grant
// from its authentication to its channels.
const grantExt = "cshare-grant"

// entry is what an authenticated connection may enter: the grant and the
// run that is its target on this machine.
type entry struct {
	Grant
	Run runtime.RunID
}

// authorize is the server's public key callback: the user name names the
// target, the ledger's keys at this moment say whether this key may enter
// it, and the runtime which run it is. A refusal reaches the client as an
// authentication banner (OpenSSH prints it) before the failure.
func (s *Service) authorize(conn ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	t, err := ParseUser(conn.User())
	if err != nil {
		return nil, banner(&Refusal{Msg: "cshare: " + err.Error()})
	}
	fp := ssh.FingerprintSHA256(key)
	now := s.d.Now()
	var g Grant
	s.d.Ledger.View(func(st *ledger.State) { g, err = Authorize(st, t, fp, s.d.Machine, now.UnixMilli()) })
	if err != nil {
		s.d.Log.Info("ssh refused", "user", text.Clip(conn.User()), "key", fp, "remote", conn.RemoteAddr().String(), "why", err.Error())
		return nil, banner(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, run, err := s.findRun(ctx, g)
	if err != nil {
		s.d.Log.Info("ssh refused", "user", text.Clip(conn.User()), "key", fp, "person", g.Person, "why", err.Error())
		return nil, banner(err)
	}
	b, err := json.Marshal(entry{Grant: g, Run: run})
	if err != nil {
		return nil, err
	}
	return &ssh.Permissions{Extensions: map[string]string{grantExt: string(b)}}, nil
}

// banner is err as an authentication failure whose message the client
// shows.
func banner(err error) error {
	msg := err.Error()
	var r *Refusal
	if !errors.As(err, &r) {
		msg = "cshare: " + msg
	}
	return &ssh.BannerError{Err: err, Message: msg + "\r\n"}
}

// findRun is the running run of g on this machine, and the driver that
// enters it.
func (s *Service) findRun(ctx context.Context, g Grant) (runtime.Enterer, runtime.RunID, error) {
	en, run, err := s.locateRun(ctx, g.Driver, g.Job, g.ID, g.Item, true)
	if err != nil {
		return nil, "", refuse("cshare: %v", err)
	}
	return en, run, nil
}

// locateRun finds the run on this machine of a contract (its container,
// running, or also stopped with anyState) or of a job's item (running),
// and the driver that enters it.
func (s *Service) locateRun(ctx context.Context, driver string, job bool, id string, item int64, anyState bool) (runtime.Enterer, runtime.RunID, error) {
	d, ok := s.d.Drivers.Get(driver)
	if !ok {
		return nil, "", fmt.Errorf("this machine has no %s driver", driver)
	}
	en, ok := d.(runtime.Enterer)
	if !ok {
		return nil, "", fmt.Errorf("the %s driver of this machine cannot enter runs", driver)
	}
	org := s.d.Ledger.Org()
	if !job {
		cd, ok := d.(runtime.ContractDriver)
		if !ok {
			return nil, "", fmt.Errorf("the %s driver of this machine runs no contracts", driver)
		}
		runs, err := cd.ListContracts(ctx, org, s.d.Machine)
		if err != nil {
			return nil, "", err
		}
		for _, r := range runs {
			if r.Contract == id && (r.Running || anyState) {
				return en, r.ID, nil
			}
		}
		return nil, "", fmt.Errorf("contract %s has no running container on this machine yet", id)
	}
	runs, err := d.List(ctx, map[string]string{runtime.LabelOrg: org, runtime.LabelJob: id,
		runtime.LabelItem: strconv.FormatInt(item, 10), runtime.LabelMachine: s.d.Machine})
	if err != nil {
		return nil, "", err
	}
	for _, r := range runs {
		if r.Running {
			return en, r.ID, nil
		}
	}
	return nil, "", fmt.Errorf("item %d of job %s is not running on this machine", item, id)
}

// serve accepts connections until the listener closes.
func (s *Service) serve(ctx context.Context, ln net.Listener) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			s.d.Log.Warn("ssh gateway: accept", "err", err)
			time.Sleep(10 * time.Millisecond) // out of file descriptors, say
			continue
		}
		select {
		case s.handshakes <- struct{}{}:
		default:
			// Too many handshakes at once: a flood, or clients that say
			// nothing. Those that finish free their slots; this one goes.
			_ = nc.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(ctx, nc)
		}()
	}
}

// handle runs one connection: its handshake (bounded in time), then its
// channels, each on its own goroutine, at most MaxChannels at once.
func (s *Service) handle(ctx context.Context, nc net.Conn) {
	_ = nc.SetDeadline(s.d.Now().Add(HandshakeTimeout))
	sc, chans, reqs, err := ssh.NewServerConn(nc, s.cfg)
	<-s.handshakes
	if err != nil {
		_ = nc.Close()
		s.d.Log.Debug("ssh handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	defer sc.Close()
	select {
	case s.live <- struct{}{}:
		defer func() { <-s.live }()
	default:
		s.d.Log.Warn("ssh gateway: too many connections; closing one", "remote", nc.RemoteAddr().String(), "limit", MaxConns)
		return
	}
	var e entry
	if err := json.Unmarshal([]byte(sc.Permissions.Extensions[grantExt]), &e); err != nil {
		return
	}
	if !s.track(sc, true) {
		return // closing
	}
	defer s.track(sc, false)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-cctx.Done()
		_ = sc.Close()
	}()
	// Global requests (keepalive@openssh.com, no-more-sessions@openssh.com,
	// tcpip-forward): answered no, which a keepalive takes as alive.
	go ssh.DiscardRequests(reqs)
	slots := make(chan struct{}, MaxChannels)
	var wg sync.WaitGroup
	defer func() {
		cancel() // the connection is gone: its sessions end
		wg.Wait()
	}()
	for nch := range chans {
		select {
		case slots <- struct{}{}:
		default:
			_ = nch.Reject(ssh.ResourceShortage, fmt.Sprintf("cshare: at most %d channels a connection", MaxChannels))
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			switch nch.ChannelType() {
			case "session":
				s.session(cctx, e, sc, nch)
			case "direct-tcpip":
				s.forward(cctx, e, sc, nch)
			default:
				_ = nch.Reject(ssh.UnknownChannelType, "cshare: only sessions and -L forwards")
			}
		}()
	}
}

// track adds or removes a live connection; adding fails once Close began.
func (s *Service) track(sc *ssh.ServerConn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, sc)
		return true
	}
	if s.closed {
		return false
	}
	s.conns[sc] = true
	return true
}

// who is a connection as the log names it.
func who(e entry, sc *ssh.ServerConn) []any {
	return []any{"person", e.Person, "key", e.Key, "target", e.Target.String(), "id", e.ID,
		"remote", sc.RemoteAddr().String()}
}

// clipCmd is a command as the log shows it: at most 200 bytes, one line.
func clipCmd(c string) string {
	c = strings.ReplaceAll(c, "\n", "\\n")
	if len(c) > 200 {
		c = c[:200] + "..."
	}
	return c
}

// DialContract connects to port of contract's running container on this
// machine, on its network (the Jupyter proxy's upstream).
func (s *Service) DialContract(ctx context.Context, contract string, port int) (net.Conn, error) {
	en, run, err := s.locateRun(ctx, "docker", false, contract, 0, false)
	if err != nil {
		return nil, err
	}
	return en.DialRun(ctx, run, port)
}
