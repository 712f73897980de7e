package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/libp2p/go-libp2p/core/crypto"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cshare/cshare/internal/atomicfile"
	"github.com/cshare/cshare/node/config"
	"github.com/cshare/cshare/p2p"
)

// listenFile, in the data dir, maps each configured listen multiaddr with
// port 0 to the address it was bound to last time, so that a node restarted
// with "--listen /ip4/0.0.0.0/tcp/0" comes back on its old port when that
// port is free: the addresses its peers remember stay right, and an org
// whose machines all restarted at once finds itself again.
const listenFile = "listen.json"

// loadListen reads listen.json; a missing or damaged file is no memory.
func loadListen(dir string) map[string]string {
	b, err := os.ReadFile(filepath.Join(dir, listenFile))
	if err != nil {
		return nil
	}
	var m map[string]string
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}

// saveListen records, for each configured address with port 0, the bound
// address that matches it.
func saveListen(dir string, configured, bound []string) error {
	m := map[string]string{}
	used := map[string]bool{}
	for _, c := range configured {
		if _, ok := zeroPort(c); !ok {
			continue
		}
		for _, b := range bound {
			if !used[b] && samePlace(c, b) {
				m[c] = b
				used[b] = true
				break
			}
		}
	}
	if len(m) == 0 {
		return nil
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, listenFile), append(data, '\n'), 0o600)
}

// preferListen returns the addresses to listen on: each configured address
// with port 0 becomes the address remembered for it when that port can be
// bound now, else stays as it is.
func preferListen(configured []string, remembered map[string]string) []string {
	out := make([]string, len(configured))
	for i, c := range configured {
		out[i] = c
		r, ok := remembered[c]
		if !ok || !samePlace(c, r) {
			continue
		}
		if portFree(r) {
			out[i] = r
		}
	}
	return out
}

// reusedAll reports whether every remembered address that preferListen put
// in listen (in place of a configured one) is bound: libp2p starts when at
// least one address could be bound, and leaves the others out.
func reusedAll(listen, configured, bound []string) bool {
	for i, a := range listen {
		if i < len(configured) && a != configured[i] && !slices.Contains(bound, a) {
			return false
		}
	}
	return true
}

// zeroPort reports whether multiaddr s has a TCP or UDP port of 0, and its
// transport ("tcp" or "udp").
func zeroPort(s string) (string, bool) {
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return "", false
	}
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_TCP, ma.P_UDP:
			return c.Protocol().Name, c.Value() == "0"
		}
	}
	return "", false
}

// samePlace reports whether bound is configured (which has port 0) with a
// port filled in: the same components, the same values except the port.
func samePlace(configured, bound string) bool {
	c, err1 := ma.NewMultiaddr(configured)
	b, err2 := ma.NewMultiaddr(bound)
	if err1 != nil || err2 != nil || len(c) != len(b) {
		return false
	}
	seenPort := false
	for i := range c {
		if c[i].Protocol().Code != b[i].Protocol().Code {
			return false
		}
		switch c[i].Protocol().Code {
		case ma.P_TCP, ma.P_UDP:
			if !seenPort {
				seenPort = true
				if c[i].Value() != "0" {
					return false
				}
				if p, err := strconv.Atoi(b[i].Value()); err != nil || p <= 0 || p > 65535 {
					return false
				}
				continue
			}
		}
		if c[i].Value() != b[i].Value() {
			return false
		}
	}
	return seenPort
}

// portFree reports whether the IP and port of multiaddr s can be bound now.
// Another process may take the port between this probe and the host's own
// bind; Start then falls back to the configured addresses.
func portFree(s string) bool {
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return false
	}
	var ip, port, proto string
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_IP4, ma.P_IP6:
			ip = c.Value()
		case ma.P_TCP, ma.P_UDP:
			if proto == "" {
				proto, port = c.Protocol().Name, c.Value()
			}
		}
	}
	if ip == "" || proto == "" {
		return false
	}
	hp := net.JoinHostPort(ip, port)
	if proto == "tcp" {
		ln, err := net.Listen("tcp", hp)
		if err != nil {
			return false
		}
		_ = ln.Close()
		return true
	}
	pc, err := net.ListenPacket("udp", hp)
	if err != nil {
		return false
	}
	_ = pc.Close()
	return true
}

// startHost starts the libp2p host on the listen addresses: port 0 ones
// take last run's port when it is free (see listenFile); should the port
// be taken in between, the configured ones.
func startHost(ctx context.Context, opts Options, cfg config.File, key crypto.PrivKey, reg prometheus.Registerer) (*p2p.Host, error) {
	listen := preferListen(opts.Listen, loadListen(opts.DataDir))
	conf := p2p.Config{Key: key, ListenAddrs: listen, Logger: opts.Logger, Metrics: reg, Trace: opts.TraceHook,
		Relay: relayMode(cfg.Relay), PortMap: cfg.NAT.PortMapEnabled()}
	h, err := p2p.New(ctx, conf)
	if !slices.Equal(listen, opts.Listen) && (err != nil || !reusedAll(listen, opts.Listen, h.ListenAddrs())) {
		if err == nil {
			_ = h.Close()
		}
		conf.ListenAddrs = opts.Listen
		h, err = p2p.New(ctx, conf)
	}
	if err != nil {
		return nil, fmt.Errorf("node: libp2p: %w", err)
	}
	if err := saveListen(opts.DataDir, opts.Listen, h.ListenAddrs()); err != nil {
		opts.Logger.Warn("could not remember the listen ports", "err", err)
	}
	return h, nil
}
