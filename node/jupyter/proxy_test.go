package jupyter

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/market"
	"github.com/cshare/cshare/runtime"
	"github.com/cshare/cshare/runtime/runtimetest"
)

// The proxy's tests: a proxy on 127.0.0.1 over a State built by hand,
// reached over HTTPS by a client that pins its certificate's fingerprint;
// the upstream is busybox httpd in a real container standing in for
// Jupyter, or, for websockets, an echo server of the test's own.

const testMachine = "m-test"

// book is a Ledger over a State the test changes.
type book struct {
	mu sync.RWMutex
	st *ledger.State
}

func (b *book) View(fn func(st *ledger.State)) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	fn(b.st)
}

func (b *book) change(fn func(st *ledger.State)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	fn(b.st)
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// world is a proxy for machine testMachine (key host) over a book in
// which renter rents.
type world struct {
	t        *testing.T
	book     *book
	px       *Service
	host     crypto.PrivKey
	renter   crypto.PrivKey
	renterID string
	hostID   string
	client   *http.Client
	base     string // https://127.0.0.1:PORT
}

func newWorld(t *testing.T, dial func(ctx context.Context, contract string, port int) (net.Conn, error)) *world {
	host, hostID := testKey(t)
	renter, renterID := testKey(t)
	st := ledger.NewState()
	st.Org = "org-test"
	w := &world{t: t, book: &book{st: st}, host: host, renter: renter, renterID: renterID, hostID: hostID}
	px, err := New(Deps{Ledger: w.book, Dial: dial, Machine: testMachine, Key: host, DataDir: t.TempDir(), Listen: "127.0.0.1:0",
		Now: time.Now, Log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := px.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); px.Close() })
	w.px = px
	w.base = "https://" + px.Addr()
	w.client = &http.Client{Transport: &http.Transport{TLSClientConfig: w.pinned()}, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return w
}

// pinned trusts the proxy's certificate by its announced fingerprint.
func (w *world) pinned() *tls.Config { return PinnedTLS(w.px.Announce().Cert) }

// contract adds a running jupyter-mode contract of the renter on this
// machine to the State.
func (w *world) contract(id string, direct bool) {
	now := time.Now().UnixMilli()
	w.book.change(func(st *ledger.State) {
		st.Contracts[id] = &ledger.Contract{Contract: market.Contract{ID: id, Seq: int64(len(st.Contracts) + 1), Renter: w.renterID, Host: "h",
			Offer: market.Offer{Machine: testMachine, Until: now + market.Hour}, Accepted: true, Start: now - 1000, End: now + market.Hour,
			Running: true, Since: now - 1000}, Spec: ledger.ContractSpec{Image: runtime.TestImage, Mode: ledger.ModeJupyter, Direct: direct}}
	})
}

func (w *world) token(id string) string {
	tok, err := Token(w.renter, w.hostID, id)
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// get is the status and body of GET path (with header h).
func (w *world) get(c *http.Client, path string, h http.Header) (int, string) {
	w.t.Helper()
	req, err := http.NewRequest(http.MethodGet, w.base+path, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProxyHTTP: through the proxy, over HTTPS with its certificate
// pinned, busybox httpd in a jupyter-mode container answers a request
// with the contract's token (the renter's derivation), in the query and
// then in the cookie the proxy set, or in Jupyter's Authorization header;
// without it the answer is 401, with another contract's or a made-up one
// 403; a direct, stopped, unknown or elsewhere contract is not proxied.
func TestProxyHTTP(t *testing.T) {
	d := runtimetest.Docker(t)
	runs := map[string]runtime.RunID{}
	var mu sync.Mutex
	w := newWorld(t, func(ctx context.Context, contract string, port int) (net.Conn, error) {
		mu.Lock()
		run, ok := runs[contract]
		mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("no run of %s", contract)
		}
		return d.DialRun(ctx, run, port)
	})
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	id := "cjupyter" + hex.EncodeToString(rnd[:])
	w.contract(id, false)
	tok := w.token(id)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := d.CreateContract(ctx, runtime.ContractSpec{Org: "org-test-" + id, Machine: testMachine, Contract: id, Image: runtime.TestImage,
		Mode: ledger.ModeJupyter, Jupyter: &runtime.Jupyter{Port: ledger.JupyterPort, Token: tok},
		OnStart:    `mkdir -p /www$CSHARE_JUPYTER_BASE_URL && echo hello-from-jupyter > /www$CSHARE_JUPYTER_BASE_URL/index.html`,
		Entrypoint: "httpd", Cmd: []string{"-f", "-p", "8888", "-h", "/www"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.RemoveContract(ctx, run)
	})
	if err := d.StartContract(ctx, run); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	runs[id] = run
	mu.Unlock()

	path := "/contract/" + id + "/"
	// httpd comes up in the background: wait for it through the proxy.
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := w.get(w.client, path+"?token="+tok, nil)
		if code == http.StatusOK && body == "hello-from-jupyter\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the token: %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := w.get(w.client, path, nil); code != http.StatusUnauthorized || !strings.Contains(body, "needs its token") {
		t.Errorf("without a token: %d %q", code, body)
	}
	if code, _ := w.get(w.client, path+"?token=x"+tok[1:], nil); code != http.StatusForbidden {
		t.Errorf("a wrong token: %d", code)
	}
	other := w.token("cother")
	if code, _ := w.get(w.client, path+"?token="+other, nil); code != http.StatusForbidden {
		t.Errorf("another contract's token: %d", code)
	}
	if code, body := w.get(w.client, path, http.Header{"Authorization": {"token " + tok}}); code != http.StatusOK || body != "hello-from-jupyter\n" {
		t.Errorf("Jupyter's Authorization header: %d %q", code, body)
	}
	if code, _ := w.get(w.client, "/contract/"+id, nil); code != http.StatusFound {
		t.Errorf("the path without its slash: %d, want a redirect", code)
	}

	// The query's token leaves a cookie that serves the next requests.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Transport: &http.Transport{TLSClientConfig: w.pinned()}, Jar: jar, Timeout: time.Minute}
	if code, _ := w.get(browser, path+"?token="+tok, nil); code != http.StatusOK {
		t.Fatalf("browser with the token: %d", code)
	}
	if code, body := w.get(browser, path+"index.html", nil); code != http.StatusOK || body != "hello-from-jupyter\n" {
		t.Errorf("browser with the cookie: %d %q", code, body)
	}

	// Not proxied: an unknown contract, a direct one, a stopped one, one
	// on another machine.
	if code, _ := w.get(w.client, "/contract/cnone/?token="+tok, nil); code != http.StatusNotFound {
		t.Errorf("an unknown contract: %d", code)
	}
	w.contract("cdirect", true)
	if code, _ := w.get(w.client, "/contract/cdirect/?token="+w.token("cdirect"), nil); code != http.StatusNotFound {
		t.Errorf("a direct contract: %d", code)
	}
	if code, _ := w.get(w.client, "/index.html", nil); code != http.StatusNotFound {
		t.Errorf("outside /contract/: %d", code)
	}
	w.book.change(func(st *ledger.State) { st.Contracts[id].Running = false })
	if code, body := w.get(w.client, path+"?token="+tok, nil); code != http.StatusConflict {
		t.Errorf("a stopped contract: %d %q", code, body)
	}
	w.book.change(func(st *ledger.State) { st.Contracts[id].Running = true; st.Contracts[id].Offer.Machine = "elsewhere" })
	if code, _ := w.get(w.client, path+"?token="+tok, nil); code != http.StatusNotFound {
		t.Errorf("a contract of another machine: %d", code)
	}
}

// TestProxyWebsocket: a websocket through the proxy reaches an echo
// server (the test's, standing in for a Jupyter kernel's channel) and
// echoes both ways, with the token; without it the handshake gets 401.
// The upstream sees the request's own Host and path, and not the proxy's
// cookie.
func TestProxyWebsocket(t *testing.T) {
	var seen sync.Map
	up := websocket.Upgrader{CheckOrigin: func(r *http.Request) bool { return true }}
	echo := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		seen.Store("host", r.Host)
		seen.Store("path", r.URL.Path)
		seen.Store("cookie", r.Header.Get("Cookie"))
		c, err := up.Upgrade(rw, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, b, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, append([]byte("echo:"), b...)); err != nil {
				return
			}
		}
	}))
	defer echo.Close()
	w := newWorld(t, func(ctx context.Context, contract string, port int) (net.Conn, error) {
		if contract != "cws" || port != ledger.JupyterPort {
			return nil, fmt.Errorf("dialled %s:%d", contract, port)
		}
		var dl net.Dialer
		return dl.DialContext(ctx, "tcp", echo.Listener.Addr().String())
	})
	w.contract("cws", false)
	tok := w.token("cws")
	wsURL := "wss://" + w.px.Addr() + "/contract/cws/api/kernels/k1/channels"
	dialer := websocket.Dialer{TLSClientConfig: w.pinned(), HandshakeTimeout: 30 * time.Second}
	_, resp, err := dialer.Dial(wsURL, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %v, %+v", err, resp)
	}
	c, _, err := dialer.Dial(wsURL+"?token="+tok, http.Header{"Cookie": {"other=1; " + CookiePrefix + "cws=" + tok}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	for i, msg := range [][]byte{[]byte("hello"), bytes.Repeat([]byte("x"), 100<<10)} {
		if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.ReadMessage()
		if err != nil || !bytes.Equal(b, append([]byte("echo:"), msg...)) {
			t.Fatalf("message %d: %d bytes back, %v", i, len(b), err)
		}
	}
	if h, _ := seen.Load("host"); h != w.px.Addr() {
		t.Errorf("upstream saw Host %v, want %s", h, w.px.Addr())
	}
	if p, _ := seen.Load("path"); p != "/contract/cws/api/kernels/k1/channels" {
		t.Errorf("upstream saw path %v", p)
	}
	if ck, _ := seen.Load("cookie"); ck != "other=1" {
		t.Errorf("upstream saw cookies %q", ck)
	}
}
