package node

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cshare/cshare/internal/atomicfile"
	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/orgsvc"
	"github.com/cshare/cshare/node/web"
)

// checkAPIOptions refuses a non-loopback API address without TLS or
// --api-insecure-remote, and half a TLS pair. It runs before anything
// listens (Start calls it first).
func checkAPIOptions(o Options) error {
	if (o.APITLSCert == "") != (o.APITLSKey == "") {
		return fmt.Errorf("--api-tls-cert and --api-tls-key: give both (PEM files) or neither")
	}
	if o.APITLSCert != "" || o.APIInsecureRemote {
		return nil
	}
	host, _, err := net.SplitHostPort(o.API)
	if err != nil {
		return fmt.Errorf("--api: %q is not HOST:PORT; use e.g. %s", o.API, DefaultAPI)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--api: %s is not a loopback address; serve it with --api-tls-cert and --api-tls-key, or accept plain HTTP with --api-insecure-remote", o.API)
	}
	return nil
}

// services are what serve the API's routes: the node itself (its status),
// and its services.
func (n *Node) services() api.Services {
	return api.Services{Node: n, Org: n.orgs, Leave: n.orgs.Leaving(), Jobs: n.jobs, Market: jupyterMarket{n.market, n}, Datasets: n.ds, Usage: n.orgs.Usage(), History: orgsvc.HistoryOf(n.orgs), Gateway: n.gw, Events: n.ev.bus, Tokens: n.tokens}
}

// serveAPI serves the services' routes, /metrics and the dashboard
// (node/web) on Options.API.
func (n *Node) serveAPI() error {
	tokBytes := make([]byte, 24)
	if _, err := rand.Read(tokBytes); err != nil {
		return err
	}
	n.token = hex.EncodeToString(tokBytes)
	if n.opts.token != "" {
		n.token = n.opts.token
	}
	var tlsConf *tls.Config
	var certPEM []byte
	if n.opts.APITLSCert != "" {
		cert, err := tls.LoadX509KeyPair(n.opts.APITLSCert, n.opts.APITLSKey)
		if err != nil {
			return fmt.Errorf("--api-tls-cert/--api-tls-key: %w", err)
		}
		if certPEM, err = os.ReadFile(n.opts.APITLSCert); err != nil {
			return fmt.Errorf("--api-tls-cert: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", n.opts.API)
	if err != nil {
		return fmt.Errorf("node: --api %s: %w (is another node running? use --api 127.0.0.1:0 for a free port)", n.opts.API, err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		n.log.Warn("the API listens on a non-loopback address; anyone who can reach it and has the token controls this node", "addr", ln.Addr().String(), "tls", tlsConf != nil)
	}
	n.apiAddr = ln.Addr().String()
	if n.tokens, err = api.OpenTokens(filepath.Join(n.opts.DataDir, api.TokensFile), n.opts.Now); err != nil {
		_ = ln.Close()
		return fmt.Errorf("node: API access tokens: %w", err)
	}
	svc := n.services()
	n.web = web.New(web.Config{Services: svc, Now: n.opts.Now, Log: n.log, TLS: tlsConf != nil, UploadDir: filepath.Join(n.opts.DataDir, "uploads"), Carry: n.opts.dash})
	svc.Dashboard = n.web
	mux := api.HandlerAuth(svc, api.Auth{Token: n.token, Lookup: n.tokens.Lookup, Session: n.web.SessionOK})
	mux.Handle("GET /metrics", promhttp.HandlerFor(linted{n.reg}, promhttp.HandlerOpts{}))
	n.web.Register(mux.ServeMux)
	n.spawn(func() { n.web.Run(n.ctx) })
	h := api.Guard(mux, api.GuardOptions{Token: n.token, Addr: n.apiAddr, TLS: tlsConf != nil, PublicMetrics: n.cfg.Metrics.Public})
	n.apiSrv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsConf}
	if err := atomicfile.WriteFile(filepath.Join(n.opts.DataDir, api.TokenFile), []byte(n.token+"\n"), 0o600); err != nil {
		return err
	}
	addr := n.apiAddr
	certFile := filepath.Join(n.opts.DataDir, api.CertFile)
	if tlsConf != nil {
		addr = "https://" + addr
		if err := atomicfile.WriteFile(certFile, certPEM, 0o600); err != nil {
			return err
		}
	} else if err := os.Remove(certFile); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(n.opts.DataDir, api.AddrFile), []byte(addr+"\n"), 0o600); err != nil {
		return err
	}
	if tlsConf != nil {
		go func() { _ = n.apiSrv.ServeTLS(ln, "", "") }()
	} else {
		go func() { _ = n.apiSrv.Serve(ln) }()
	}
	return nil
}
