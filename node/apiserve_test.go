package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/runtime/hw"
)

func startLone(t *testing.T, o Options) *Node {
	t.Helper()
	o.DataDir, o.NVML, o.DisableMDNS = t.TempDir(), hw.NoNVML{}, true
	if o.API == "" {
		o.API = "127.0.0.1:0"
	}
	o.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	n, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func getStatus(t *testing.T, c *http.Client, url, host, bearer string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if host != "" {
		req.Host = host
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestAPIDashboardAndMetricsNeedTokenAndHost is the must-hold on a
// real node: the dashboard and /metrics refuse a request without the token
// (401) or with a foreign Host (403); /metrics answers one with both, the
// dashboard wants its session even then (the token is no session:
// TestDashboardNeedsItsSession).
func TestAPIDashboardAndMetricsNeedTokenAndHost(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(conf, []byte("metrics:\n  public: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, public := range []bool{false, true} {
		o := Options{}
		if public {
			o.ConfigPath = conf
		}
		n := startLone(t, o)
		base := "http://" + n.APIAddr()
		for _, path := range []string{"/", "/metrics"} {
			want := http.StatusUnauthorized
			if public && path == "/metrics" {
				want = http.StatusOK
			}
			if code := getStatus(t, http.DefaultClient, base+path, "", ""); code != want {
				t.Errorf("public=%v GET %s without the token: %d, want %d", public, path, code, want)
			}
			if code := getStatus(t, http.DefaultClient, base+path, "rebound.example:"+strings.Split(n.APIAddr(), ":")[1], n.Token()); code != http.StatusForbidden {
				t.Errorf("public=%v GET %s with a foreign Host: %d, want 403", public, path, code)
			}
			want = http.StatusOK
			if path == "/" {
				want = http.StatusUnauthorized
			}
			if code := getStatus(t, http.DefaultClient, base+path, "", n.Token()); code != want {
				t.Errorf("public=%v GET %s with the token: %d, want %d", public, path, code, want)
			}
		}
		if code := getStatus(t, http.DefaultClient, base+"/v1/status", "", ""); code != http.StatusUnauthorized {
			t.Errorf("GET /v1/status without the token: %d, want 401", code)
		}
	}
}

func TestAPIRemoteNeedsTLSOrInsecureFlag(t *testing.T) {
	for _, o := range []Options{
		{API: "0.0.0.0:0"},
		{API: "[::]:0"},
		{API: "example.com:0"},
		{API: "127.0.0.1:0", APITLSCert: "c.pem"},
	} {
		err := checkAPIOptions(o)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "--api") {
			t.Errorf("%+v: %v, want a one-line refusal naming the flag", o, err)
		}
	}
	for _, o := range []Options{
		{API: "127.0.0.1:0"}, {API: "[::1]:7480"}, {API: "localhost:0"},
		{API: "0.0.0.0:0", APIInsecureRemote: true},
		{API: "0.0.0.0:0", APITLSCert: "c", APITLSKey: "k"},
	} {
		if err := checkAPIOptions(o); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestAPIServedOverTLS: with --api-tls-cert/--api-tls-key the node serves
// HTTPS, api.addr says https:// and the CLI's client (through the data
// dir, which pins api.cert) talks to it; plain HTTP gets nothing.
func TestAPIServedOverTLS(t *testing.T) {
	certFile, keyFile := selfSigned(t)
	n := startLone(t, Options{API: "0.0.0.0:0", APITLSCert: certFile, APITLSKey: keyFile})
	addr, err := os.ReadFile(filepath.Join(n.opts.DataDir, api.AddrFile))
	if err != nil || !strings.HasPrefix(string(addr), "https://") {
		t.Fatalf("api.addr: %q %v, want https://", addr, err)
	}
	cl, err := api.DialDataDir(n.opts.DataDir, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Status(context.Background()); err != nil {
		t.Fatalf("status over TLS: %v", err)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	if resp, err := c.Get("http://" + n.APIAddr() + "/v1/status"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("plain HTTP to the TLS API: %d", resp.StatusCode)
		}
	}
	// Another certificate than the pinned one is refused.
	other, _ := selfSigned(t)
	pem, _ := os.ReadFile(other)
	if _, err := api.NewTLSClient(strings.TrimSpace(string(addr)), n.Token(), pem).Status(context.Background()); err == nil {
		t.Error("a client pinning another certificate talked to the node")
	}
}

func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cshare-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
