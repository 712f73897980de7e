package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// gwStub serves the gateway's routes: an archive put is counted and kept,
// a get sends back what was put.
type gwStub struct {
	got []byte
}

func (*gwStub) AddSSHKey(context.Context, SSHKeyAdd) (SSHKeyInfo, error) { return SSHKeyInfo{}, nil }
func (*gwStub) SSHKeys(context.Context) ([]SSHKeyInfo, error)            { return nil, nil }
func (*gwStub) RemoveSSHKey(context.Context, SSHKeyRemove) (SSHKeyInfo, error) {
	return SSHKeyInfo{}, nil
}
func (*gwStub) ContractSSH(context.Context, string) (SSHTarget, error)   { return SSHTarget{}, nil }
func (*gwStub) JobSSH(context.Context, string, int64) (SSHTarget, error) { return SSHTarget{}, nil }

func (g *gwStub) PutArchive(_ context.Context, t ArchiveTarget, body io.Reader) (ArchiveResult, error) {
	b, err := io.ReadAll(body)
	g.got = b
	return ArchiveResult{Path: t.Path, Bytes: int64(len(b))}, err
}

func (g *gwStub) GetArchive(context.Context, ArchiveTarget) (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(g.got)), nil
}

// TestArchiveStreams: an archive of 5 MiB, past MaxBodySize, streams in
// through Guard and the route to the service and back out byte for byte;
// every other body stays capped; a path that is not one line is refused
// naming the field.
func TestArchiveStreams(t *testing.T) {
	g := &gwStub{}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = Guard(Handler(withGateway(g), "tok"), GuardOptions{Token: "tok", Addr: srv.Listener.Addr().String()})
	srv.Start()
	defer srv.Close()
	cl := NewClient(srv.Listener.Addr().String(), "tok")
	data := make([]byte, 5<<20)
	_, _ = rand.Read(data)
	ctx := context.Background()
	res, err := cl.PutArchive(ctx, ArchiveTarget{Ref: "c1", Path: "/root"}, bytes.NewReader(data))
	if err != nil || res.Bytes != int64(len(data)) || !bytes.Equal(g.got, data) {
		t.Fatalf("put: %+v %v", res, err)
	}
	rc, err := cl.GetArchive(ctx, ArchiveTarget{Job: true, Ref: "j1", Item: 3, Path: "/x"})
	if err != nil {
		t.Fatal(err)
	}
	back, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(back, data) {
		t.Fatalf("get: %d bytes back", len(back))
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/contracts", bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 5 MiB contract request: %d", resp.StatusCode)
	}
	_, err = cl.PutArchive(ctx, ArchiveTarget{Ref: "c1", Path: "/a\nb"}, strings.NewReader(""))
	var se *StatusError
	if !asStatus(err, &se) || se.Field != "path" || se.Code != 400 {
		t.Fatalf("a path of two lines: %v", err)
	}
	rc, err = cl.GetArchive(ctx, ArchiveTarget{Job: true, Ref: "j1", Path: "/x"})
	if err != nil {
		t.Fatalf("item 0: %v", err)
	}
	rc.Close()
	// Without the token, nothing.
	req, _ = http.NewRequest(http.MethodPut, srv.URL+"/v1/contracts/c1/archive?path=/x", bytes.NewReader(data))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", resp.StatusCode)
	}
}

func asStatus(err error, se **StatusError) bool {
	e, ok := err.(*StatusError)
	*se = e
	return ok
}

// withGateway is stubs() with the gateway's routes served by g.
func withGateway(g GatewayService) Services {
	svc := stubs()
	svc.Gateway = g
	return svc
}
