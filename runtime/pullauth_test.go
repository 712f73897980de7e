package runtime

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/cshare/cshare/internal/regauth"
)

// fakeRegistry imitates a registry's /v2/ Basic auth challenge on
// 127.0.0.1 (which the engine takes as an insecure registry): it answers
// 401 with a challenge to requests without credentials, and records every
// Authorization header it is sent. It serves no image: a pull ends at the
// manifest, after the engine has authenticated.
type fakeRegistry struct {
	mu    sync.Mutex
	auths []string
}

func (f *fakeRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := r.Header.Get("Authorization")
	f.mu.Lock()
	if h != "" {
		f.auths = append(f.auths, h)
	}
	f.mu.Unlock()
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if h == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="cshare-test"`)
		http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
		return
	}
	if r.URL.Path == "/v2/" {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("{}"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
}

func (f *fakeRegistry) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auths...)
}

// TestPullSendsSealedCredentials: credentials sealed with age to this
// machine's recipient are opened and reach the registry the engine pulls
// from, as HTTP Basic auth: the real Docker engine, pulling from a fake
// registry on 127.0.0.1.
func TestPullSendsSealedCredentials(t *testing.T) {
	d, _ := dockerForTest(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := &fakeRegistry{}
	srv := &http.Server{Handler: reg, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	host := ln.Addr().String()
	image := host + "/team/private-app:1"

	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	const secret = "pr1vate-T0ken"
	c, err := regauth.ParseFile("--registry-auth", []byte("alice:"+secret+"\n"), image)
	if err != nil {
		t.Fatal(err)
	}
	blob, err := regauth.Seal("--registry-auth", "P-alice", c, []string{id.Recipient().String()})
	if err != nil {
		t.Fatal(err)
	}
	opened, err := regauth.Open(blob, id, "P-alice", image)
	if err != nil {
		t.Fatal(err)
	}
	auth := &RegistryAuth{Server: opened.Server, Username: opened.Username, Password: opened.Password, Token: opened.IdentityToken}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = d.EnsureImage(ctx, image, auth)
	if !errors.Is(err, ErrImageNotFound) {
		t.Fatalf("EnsureImage = %v, want the registry's manifest unknown", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("the pull error quotes the secret: %v", err)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+secret))
	got := reg.seen()
	if len(got) == 0 {
		t.Skipf("the engine did not reach the registry on %s (its error: %v): it runs in another network namespace", host, err)
	}
	t.Logf("the registry saw %d authenticated requests; the pull ended with: %v", len(got), err)
	for _, h := range got {
		if h != want {
			t.Fatalf("the registry got Authorization %q, want %q", h, want)
		}
	}
}
