package gateway

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// forward serves a direct-tcpip channel (ssh -L): a connection to a port
// of the target's run, dialled from this node to the container's address
// on its network (runtime.Enterer.DialRun), and the bytes both ways.
func (s *Service) forward(ctx context.Context, e entry, sc *ssh.ServerConn, nch ssh.NewChannel) {
	f, err := parseForward(nch.ExtraData())
	if err != nil {
		_ = nch.Reject(ssh.Prohibited, "cshare: "+err.Error())
		return
	}
	en, run, err := s.findRun(ctx, e.Grant)
	if err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, err.Error())
		return
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := en.DialRun(dctx, run, int(f.Port))
	cancel()
	if err != nil {
		_ = nch.Reject(ssh.ConnectionFailed, "cshare: "+err.Error())
		return
	}
	defer conn.Close()
	ch, reqs, err := nch.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(reqs)
	start := s.d.Now()
	var in, out atomic.Int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		n, _ := io.Copy(conn, ch)
		in.Add(n)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}()
	go func() {
		defer wg.Done()
		n, _ := io.Copy(ch, conn)
		out.Add(n)
		_ = ch.CloseWrite()
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		_ = conn.Close()
		_ = ch.Close()
		<-done
	}
	s.d.Log.Info("ssh forward", append(who(e, sc), "port", f.Port, "bytes_in", in.Load(), "bytes_out", out.Load(),
		"duration", s.d.Now().Sub(start).Round(time.Millisecond).String())...)
}
