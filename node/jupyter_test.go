package node

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
	"github.com/cshare/cshare/node/jupyter"
)

// httpdAsJupyter is a jupyter-mode contract whose "Jupyter" is busybox
// httpd serving, under the contract's base path, the token the host put
// in the container.
var httpdAsJupyter = api.ContractCreate{Mode: "jupyter",
	OnStart:    `mkdir -p /www$CSHARE_JUPYTER_BASE_URL && echo "token $CSHARE_JUPYTER_TOKEN" > /www$CSHARE_JUPYTER_BASE_URL/index.html`,
	Entrypoint: "httpd", Cmd: []string{"-f", "-p", "8888", "-h", "/www"}}

// TestJupyterIntoContract: two nodes with Jupyter proxies; the renter on
// the second rents a CPU of the first in mode jupyter. The renter's
// contract show gives the URL through the host's proxy, found from the
// host's heartbeat, with the token the renter's person key derives; over
// HTTPS, pinned to the certificate fingerprint the host's node status
// shows, it reaches the container, whose token (the host's derivation) is
// the same; without the token it gets 401. The host's person, not the
// renter, sees no URL.
func TestJupyterIntoContract(t *testing.T) {
	host, renter, c := rentContainer(t, httpdAsJupyter)
	ctx := ctxT(t)
	st, err := host.Status(ctx)
	if err != nil || st.JupyterAddr == "" || !strings.HasPrefix(st.JupyterCert, "sha256//") {
		t.Fatalf("node status: jupyter_addr %q jupyter_cert %q, %v", st.JupyterAddr, st.JupyterCert, err)
	}
	rc := api.NewClient(renter.APIAddr(), renter.Token())
	var info api.ContractInfo
	eventually(t, 30*time.Second, "the renter's contract show has the URL", func() string {
		if info, err = rc.Contract(ctx, c.ID); err != nil || info.JupyterURL == "" {
			return fmt.Sprintf("%+v %v", info, err)
		}
		return ""
	})
	u, err := url.Parse(info.JupyterURL)
	if err != nil || u.Scheme != "https" || u.Host != st.JupyterAddr || u.Path != "/contract/"+c.ID+"/" || len(u.Query().Get("token")) != 43 {
		t.Fatalf("jupyter_url %q; the host's proxy is at %s", info.JupyterURL, st.JupyterAddr)
	}
	tok := u.Query().Get("token")
	cl := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: jupyter.PinnedTLS(st.JupyterCert)}}
	get := func(u string) (int, string) {
		resp, err := cl.Get(u)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, 30*time.Second, "Jupyter (httpd) through the proxy", func() string {
		if code, body := get(info.JupyterURL); code != http.StatusOK || body != "token "+tok+"\n" {
			return fmt.Sprintf("%d %q", code, body)
		}
		return ""
	})
	if code, _ := get("https://" + st.JupyterAddr + "/contract/" + c.ID + "/"); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
	hc := api.NewClient(host.APIAddr(), host.Token())
	if hi, err := hc.Contract(ctx, c.ID); err != nil || hi.JupyterURL != "" || hi.Mode != "jupyter" {
		t.Errorf("the host person's contract show: %q %q, %v", hi.Mode, hi.JupyterURL, err)
	}
}

// TestJupyterDirect: a jupyter-mode contract with --direct publishes its
// port on the host; the host's heartbeat announces it, and the renter's
// contract show gives an http URL to it that reaches the container.
func TestJupyterDirect(t *testing.T) {
	req := httpdAsJupyter
	req.Direct = true
	_, renter, c := rentContainer(t, req)
	ctx := ctxT(t)
	rc := api.NewClient(renter.APIAddr(), renter.Token())
	var info api.ContractInfo
	var err error
	eventually(t, 30*time.Second, "the renter's contract show has the direct URL", func() string {
		if info, err = rc.Contract(ctx, c.ID); err != nil || info.JupyterURL == "" {
			return fmt.Sprintf("%+v %v", info, err)
		}
		return ""
	})
	u, err := url.Parse(info.JupyterURL)
	if err != nil || u.Scheme != "http" || !info.Direct || u.Path != "/contract/"+c.ID+"/" {
		t.Fatalf("jupyter_url %q, direct %v", info.JupyterURL, info.Direct)
	}
	eventually(t, 30*time.Second, "Jupyter (httpd) on the published port", func() string {
		resp, err := http.Get(info.JupyterURL)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if want := "token " + u.Query().Get("token") + "\n"; string(b) != want {
			return fmt.Sprintf("%d %q, want %q", resp.StatusCode, b, want)
		}
		return ""
	})
}
