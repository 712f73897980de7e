// Package jupyter is the node's Jupyter proxy (issue 31, docs/design.md
// §24). It owns
//
//   - the proxy's HTTPS listener (node.yaml `jupyter: {listen: ":8443"}`,
//     off unless set) and its self-signed certificate (jupyter_cert.pem and
//     jupyter_key.pem in the data dir), whose fingerprint node status and
//     the heartbeat show;
//   - the proxy: https://HOST:PORT/contract/ID/ to the Jupyter port of
//     jupyter-mode contract ID's container on this machine, HTTP and
//     websockets, for whoever holds the contract's token;
//   - the token (Token): derived alike by the host machine and the renter
//     from their keys, so that nothing is stored or sent; and the URL a
//     renter's contract show prints.
//
// It reaches the node only through Deps; package node builds it, starts
// its listener (Start) and closes it (Close).
package jupyter

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/p2p"
)

// Ledger is the org's replica as the proxy reads it (*replica.Replica).
type Ledger interface {
	// View runs fn with the state under the replica's read lock.
	View(fn func(st *ledger.State))
}

// Deps is what the proxy needs from the node. Every field is required
// but Listen.
type Deps struct {
	Ledger Ledger
	// Dial connects to port of contract's running container on this
	// machine (the gateway's runtime.Enterer.DialRun).
	Dial func(ctx context.Context, contract string, port int) (net.Conn, error)
	// Machine is this machine's ID, Key its private key (the host's side
	// of Token).
	Machine string
	Key     crypto.PrivKey
	// DataDir holds the certificate.
	DataDir string
	// Listen is node.yaml's jupyter.listen ("" = no proxy).
	Listen string
	Now    func() time.Time
	Log    *slog.Logger
}

// Service is the Jupyter proxy of one node. Its methods are safe for
// concurrent use.
type Service struct {
	d     Deps
	cert  tls.Certificate
	fp    string // the certificate's fingerprint ("" without a listener)
	proxy *httputil.ReverseProxy

	mu     sync.Mutex
	ln     net.Listener
	srv    *http.Server
	closed bool
	wg     sync.WaitGroup
}

// New builds the service. With d.Listen set it loads or creates the
// certificate; it listens only on Start.
func New(d Deps) (*Service, error) {
	s := &Service{d: d}
	s.proxy = s.newProxy()
	if d.Listen == "" {
		return s, nil
	}
	c, err := loadOrCreateCert(d.DataDir, d.Now())
	if err != nil {
		return nil, fmt.Errorf("jupyter: certificate: %w", err)
	}
	if s.fp, err = Fingerprint(c.Certificate[0]); err != nil {
		return nil, fmt.Errorf("jupyter: certificate: %w", err)
	}
	s.cert = c
	return s, nil
}

// Start listens on d.Listen and serves the proxy over TLS until ctx ends
// or Close (nothing without a listener configured).
func (s *Service) Start(ctx context.Context) error {
	if s.d.Listen == "" {
		return nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.d.Listen)
	if err != nil {
		return fmt.Errorf("jupyter: jupyter.listen %s: %w", s.d.Listen, err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 20 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		TLSConfig:   &tls.Config{Certificates: []tls.Certificate{s.cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:    slog.NewLogLogger(s.d.Log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return ctx }}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.ln, s.srv = ln, srv
	s.mu.Unlock()
	s.d.Log.Info("jupyter proxy listening", "addr", ln.Addr().String(), "cert", s.fp)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		_ = srv.ServeTLS(ln, "", "")
	}()
	go func() {
		defer s.wg.Done()
		<-ctx.Done()
		_ = srv.Close()
	}()
	return nil
}

// Close stops listening, closes every connection and waits.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
	s.wg.Wait()
}

// Addr is the listener's address ("" without one).
func (s *Service) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// CertFingerprint is the certificate's fingerprint ("" without a
// listener).
func (s *Service) CertFingerprint() string { return s.fp }

// Announce is the proxy as this machine's heartbeat carries it, nil while
// it does not listen.
func (s *Service) Announce() *p2p.JupyterProxy {
	_, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		return nil
	}
	p, _ := strconv.ParseInt(port, 10, 64)
	return &p2p.JupyterProxy{Port: p, Cert: s.fp}
}

// URL is where a renter opens contract's Jupyter: through the proxy at
// host:port (https), or, direct, at the port the host publishes (http).
func URL(direct bool, host string, port int64, contract, token string) string {
	scheme := "https"
	if direct {
		scheme = "http"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.FormatInt(port, 10)) + "/contract/" + contract + "/?token=" + token
}
