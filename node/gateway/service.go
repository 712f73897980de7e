// Package gateway is the node's SSH gateway (issue 31, docs/design.md
// §23). It owns
//
//   - the gateway's listener (node.yaml `ssh: {listen: ":2222"}`, off
//     unless set), its host key (ssh_host_ed25519_key in the data dir) and
//     its sessions: a shell or a command inside a contract's container or
//     a job item's run, with or without a terminal, window changes, the
//     exit status, the client's environment, keepalives, and -L port
//     forwarding to the container's ports;
//   - who may enter what (Authorize): the keys the ledger holds, read at
//     each connection, so a key added or removed takes effect at once;
//   - the API of a person's SSH keys (add, list, remove: sshkey.* entries),
//     and where to ssh into a contract or a job's item (from the host
//     machine's heartbeat);
//   - copying files in and out of containers (tar archives through the
//     runtime's archive calls), and ArchiveProtocol, which carries a copy
//     to the machine that runs the container.
//
// It reaches the node only through Deps; package node builds it, starts
// its listener (Start) and closes it (Close).
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/p2p"
	"github.com/cshare/cshare/runtime"
)

// Ledger is the org's replica as the gateway uses it (*replica.Replica).
type Ledger interface {
	// View runs fn with the state as of the last fold, without a lock.
	View(fn func(st *ledger.State))
	// Write signs, stores and folds an entry; a non-nil entry with an
	// error was written but kept without effect.
	Write(ctx context.Context, kind string, payload any) (*ledger.Entry, error)
	// Org is the org's ID, "" in no org.
	Org() string
}

// Drivers is the runtime's driver registry (*runtime.Registry).
type Drivers interface {
	Get(name string) (runtime.Driver, bool)
}

// Machines says where other machines are (the node's liveness and peers).
type Machines interface {
	// Gateway is machine's SSH gateway as its latest heartbeat announced
	// it, and a host name or IP this node reaches it at; ok is false when
	// the machine is offline or has no gateway.
	Gateway(machine string) (g p2p.SSHGateway, host string, ok bool)
	// RunningOn is the machine that runs item of job, as its leases say
	// ("" when none does).
	RunningOn(job string, item int64) string
}

// Deps is what the gateway needs from the node. Every field is required
// but Listen and Streams.
type Deps struct {
	Ledger   Ledger
	Drivers  Drivers
	Machines Machines
	// Machine is this machine's ID; Person the person it acts for now.
	Machine string
	Person  func() string
	// Streams serves ArchiveProtocol and opens it to other machines
	// (the libp2p host); nil: copies only into this machine's containers.
	Streams Streams
	// DataDir holds the host key.
	DataDir string
	// Listen is node.yaml's ssh.listen ("" = no gateway).
	Listen string
	Now    func() time.Time
	Log    *slog.Logger
}

// Limits of the gateway's listener: what one client can hold, so that no
// client stops others.
const (
	// MaxHandshakes is the most connections in their handshake at once;
	// more are closed at once.
	MaxHandshakes = 64
	// MaxConns is the most authenticated connections at once.
	MaxConns = 512
	// MaxChannels is the most channels (sessions, forwards) one
	// connection holds open; more are refused.
	MaxChannels = 32
	// HandshakeTimeout bounds a connection's handshake and
	// authentication.
	HandshakeTimeout = 20 * time.Second
)

// HostKeyFile is the gateway's host key in the data dir (OpenSSH PEM).
const HostKeyFile = "ssh_host_ed25519_key"

// Service is the gateway of one node. Its methods are safe for concurrent
// use.
type Service struct {
	d      Deps
	signer ssh.Signer // nil without a listener
	cfg    *ssh.ServerConfig

	mu     sync.Mutex
	ln     net.Listener
	closed bool
	conns  map[*ssh.ServerConn]bool
	wg     sync.WaitGroup

	handshakes chan struct{} // a slot per connection in its handshake
	live       chan struct{} // a slot per authenticated connection
}

// New builds the service. With d.Listen set it loads or creates the host
// key; it listens only on Start.
func New(d Deps) (*Service, error) {
	s := &Service{d: d, conns: map[*ssh.ServerConn]bool{},
		handshakes: make(chan struct{}, MaxHandshakes), live: make(chan struct{}, MaxConns)}
	if d.Listen == "" {
		return s, nil
	}
	signer, err := loadOrCreateHostKey(filepath.Join(d.DataDir, HostKeyFile))
	if err != nil {
		return nil, fmt.Errorf("gateway: host key: %w", err)
	}
	s.signer = signer
	s.cfg = &ssh.ServerConfig{PublicKeyCallback: s.authorize, ServerVersion: "SSH-2.0-cshare"}
	s.cfg.AddHostKey(signer)
	return s, nil
}

// Start serves ArchiveProtocol, and listens on d.Listen and serves SSH
// until ctx ends or Close (without a listener configured, no SSH).
func (s *Service) Start(ctx context.Context) error {
	if s.d.Streams != nil {
		s.d.Streams.SetStreamHandler(ArchiveProtocol, s.serveArchive)
	}
	if s.d.Listen == "" {
		return nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.d.Listen)
	if err != nil {
		return fmt.Errorf("gateway: ssh.listen %s: %w", s.d.Listen, err)
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	s.ln = ln
	s.mu.Unlock()
	s.d.Log.Info("ssh gateway listening", "addr", ln.Addr().String(), "host_key", s.HostKeyFingerprint())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.serve(ctx, ln)
	}()
	return nil
}

// Close stops listening, closes every connection and waits for their
// sessions to end.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	if s.ln != nil {
		_ = s.ln.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
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

// HostKeyFingerprint is the host key's SHA256 fingerprint ("" without a
// listener).
func (s *Service) HostKeyFingerprint() string {
	if s.signer == nil {
		return ""
	}
	return ssh.FingerprintSHA256(s.signer.PublicKey())
}

// Announce is the gateway as this machine's heartbeat carries it, nil
// while it does not listen.
func (s *Service) Announce() *p2p.SSHGateway {
	addr := s.Addr()
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	p, _ := strconv.ParseInt(port, 10, 64)
	return &p2p.SSHGateway{Port: p, HostKey: authorizedLine(s.signer.PublicKey())}
}

func authorizedLine(k ssh.PublicKey) string {
	b := ssh.MarshalAuthorizedKey(k)
	return string(b[:len(b)-1])
}

func (s *Service) needOrg() error {
	if s.d.Ledger.Org() == "" {
		return api.NoOrg()
	}
	return nil
}
