//go:build e2e

package e2e

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node/jupyter"
)

// TestJupyterThroughTheCLI: two node processes with Jupyter proxies
// (node.yaml jupyter.listen); the second node's person rents a CPU of the
// first with `contract create --mode jupyter` (busybox httpd standing in
// for Jupyter, given as --entrypoint with its arguments). Through the CLI
// alone: `contract show --json` gives the renter jupyter_url, `contract
// show` prints it; over HTTPS pinned to the fingerprint the host's `node
// status --json` shows, the URL reaches the container; without the token
// the proxy answers 401.
func TestJupyterThroughTheCLI(t *testing.T) {
	dockerAvailable(t)
	conf := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(conf, []byte("jupyter:\n  listen: 127.0.0.1:0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := mesh(t, 2, "--config", conf)
	host, renter := ps[0], ps[1]
	id := rentWith(t, host, renter, "--mode", "jupyter", "--entrypoint", "httpd",
		"--onstart", `mkdir -p /www$CSHARE_JUPYTER_BASE_URL && echo hello-jupyter > /www$CSHARE_JUPYTER_BASE_URL/index.html`,
		"--", "-f", "-p", "8888", "-h", "/www")
	defer func() {
		renter.must("contract", "rm", id)
		eventually(t, 30*time.Second, "the rental's container removed", func() bool {
			st, _ := containerState(t, id)
			return st == ""
		})
	}()
	var st struct {
		JupyterAddr string `json:"jupyter_addr"`
		JupyterCert string `json:"jupyter_cert"`
	}
	host.json(&st, "node", "status")
	if st.JupyterAddr == "" || !strings.HasPrefix(st.JupyterCert, "sha256//") {
		t.Fatalf("node status: %+v", st)
	}
	var c struct {
		JupyterURL string `json:"jupyter_url"`
	}
	eventually(t, 30*time.Second, "contract show --json has jupyter_url", func() bool {
		renter.json(&c, "contract", "show", id)
		return c.JupyterURL != ""
	})
	u, err := url.Parse(c.JupyterURL)
	if err != nil || u.Scheme != "https" || u.Host != st.JupyterAddr || u.Path != "/contract/"+id+"/" {
		t.Fatalf("jupyter_url %q; the host's proxy %s", c.JupyterURL, st.JupyterAddr)
	}
	if out := renter.must("contract", "show", id); !strings.Contains(out, c.JupyterURL) {
		t.Fatalf("contract show does not print the URL:\n%s", out)
	}
	cl := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: jupyter.PinnedTLS(st.JupyterCert)}}
	get := func(u string) (int, string) {
		resp, err := cl.Get(u)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	eventually(t, 30*time.Second, "Jupyter (httpd) through the host's proxy", func() bool {
		code, body := get(c.JupyterURL)
		return code == http.StatusOK && body == "hello-jupyter\n"
	})
	if code, _ := get("https://" + st.JupyterAddr + "/contract/" + id + "/"); code != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", code)
	}
}
