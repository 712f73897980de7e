package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cshare/cshare/internal/tarcopy"
)

// The SSH gateway's part of the API (issue 31, package node/gateway): a
// person's SSH keys in the ledger, where to ssh into a contract or a
// running job item, and copying files in and out of their containers.

// SSHKeyAdd is POST /v1/user/ssh-keys: one public key as a FILE.pub holds
// it, for this machine's person.
type SSHKeyAdd struct {
	Key string `json:"key"`
}

// SSHKeyRemove is POST /v1/user/ssh-keys/remove: one of the person's keys
// by its fingerprint (SHA256:..., as ssh-keygen -l and ssh-key ls print it).
type SSHKeyRemove struct {
	Fingerprint string `json:"fingerprint"`
}

// SSHKeyInfo is one of a person's SSH keys as `user ssh-key ls` prints it.
type SSHKeyInfo struct {
	Fingerprint string `json:"fingerprint"`
	Type        string `json:"type"`
	Comment     string `json:"comment"`
	Key         string `json:"key"`   // authorized_keys form
	Added       string `json:"added"` // RFC 3339
}

// SSHTarget is where `contract ssh` and `job ssh` connect: the gateway of
// the machine that runs the container, as its heartbeat announces it.
type SSHTarget struct {
	// User is the gateway's user name for the target: CONTRACT_ID or
	// JOB_ID.ITEM (full IDs).
	User    string `json:"user"`
	Machine string `json:"machine"`
	// Host and Port are the gateway's address as seen from this node.
	Host string `json:"host"`
	Port int    `json:"port"`
	// HostKey is the gateway's host key (authorized_keys form), so the
	// client checks it without asking; HostKeyFingerprint its SHA256.
	HostKey            string `json:"host_key"`
	HostKeyFingerprint string `json:"host_key_fingerprint"`
	// URL is ssh://USER@HOST:PORT.
	URL string `json:"url"`
}

// GatewayService is the gateway's part of the node's API, beside Service:
// Handler serves its routes when the service it is given implements it.
type GatewayService interface {
	AddSSHKey(ctx context.Context, req SSHKeyAdd) (SSHKeyInfo, error)
	SSHKeys(ctx context.Context) ([]SSHKeyInfo, error)
	RemoveSSHKey(ctx context.Context, req SSHKeyRemove) (SSHKeyInfo, error)
	ContractSSH(ctx context.Context, ref string) (SSHTarget, error)
	JobSSH(ctx context.Context, ref string, item int64) (SSHTarget, error)
	// PutArchive unpacks the tar archive body into directory t.Path of
	// t's container; GetArchive is a tar archive of t.Path there.
	PutArchive(ctx context.Context, t ArchiveTarget, body io.Reader) (ArchiveResult, error)
	GetArchive(ctx context.Context, t ArchiveTarget) (io.ReadCloser, error)
}

// ArchiveTarget is a path inside a contract's container (Job false) or
// inside the container running item Item of a job, for `contract cp` and
// `job cp`. Ref is an ID or a reference, as the CLI takes them.
type ArchiveTarget struct {
	Job  bool
	Ref  string
	Item int64
	Path string
}

// ArchiveResult is what PUT .../archive unpacked: where, and how many
// bytes of archive.
type ArchiveResult struct {
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// MaxArchivePath bounds the path of an archive request.
const MaxArchivePath = 4096

// archivePath is the request's ?path=: one line of UTF-8, without NUL.
func archivePath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" || len(p) > MaxArchivePath || strings.ContainsAny(p, "\x00\n\r") || !utf8.ValidString(p) {
		return "", FieldErrorf(http.StatusBadRequest, "path", "path: %q; allowed: a path in the container of 1 to %d bytes, one line", Ellipsize(p), MaxArchivePath)
	}
	return p, nil
}

// StreamsBody says r's body is an archive that streams to its route
// uncapped (PUT .../archive): Guard and the routes cap every other body at
// MaxBodySize.
func StreamsBody(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/archive") &&
		(strings.HasPrefix(r.URL.Path, "/v1/contracts/") || strings.HasPrefix(r.URL.Path, "/v1/jobs/"))
}

// closeStream makes the answer to a refused archive close the connection:
// the rest of the archive is not read, and a connection left with it
// unread would hold the client's upload.
func closeStream(w http.ResponseWriter, r *http.Request) {
	if StreamsBody(r) {
		w.Header().Set("Connection", "close")
	}
}

// archiveTarget is the ArchiveTarget a request names.
func archiveTarget(r *http.Request, job bool) (ArchiveTarget, error) {
	t := ArchiveTarget{Job: job, Ref: r.PathValue("id")}
	var err error
	if job {
		if t.Item, err = itemParam(r); err != nil {
			return t, err
		}
	}
	t.Path, err = archivePath(r)
	return t, err
}

// archiveRoutes are a container's archive in (PUT) and out (GET).
func archiveRoutes(svc GatewayService, prefix string, job bool) []route {
	return []route{
		{"PUT " + prefix + "/{id}/archive", noBody(func(ctx context.Context, r *http.Request) (ArchiveResult, error) {
			t, err := archiveTarget(r, job)
			if err != nil {
				return ArchiveResult{}, err
			}
			return svc.PutArchive(ctx, t, r.Body)
		})},
		{"GET " + prefix + "/{id}/archive", noBody(func(ctx context.Context, r *http.Request) (streamer, error) {
			t, err := archiveTarget(r, job)
			if err != nil {
				return nil, err
			}
			rc, err := svc.GetArchive(ctx, t)
			if err != nil {
				return nil, err
			}
			return func(w http.ResponseWriter) {
				defer rc.Close()
				w.Header().Set("Content-Type", "application/x-tar")
				w.WriteHeader(http.StatusOK)
				if _, err := io.Copy(w, rc); err != nil {
					// The archive broke after the status went out: cut
					// the answer, so the client's reader fails instead
					// of taking a short archive for a whole one.
					panic(http.ErrAbortHandler)
				}
			}, nil
		})},
	}
}

// gatewayRoutes is the gateway's part of the API's table.
func gatewayRoutes(svc GatewayService) []route {
	archives := append(archiveRoutes(svc, "/v1/contracts", false), archiveRoutes(svc, "/v1/jobs", true)...)
	return append(archives, []route{
		{"POST /v1/user/ssh-keys", decoded(svc.AddSSHKey)},
		{"GET /v1/user/ssh-keys", whole(func(k SSHKeyInfo) string { return k.Fingerprint }, svc.SSHKeys)},
		{"POST /v1/user/ssh-keys/remove", decoded(svc.RemoveSSHKey)},
		{"GET /v1/contracts/{id}/ssh", onPath("id", svc.ContractSSH)},
		{"GET /v1/jobs/{id}/ssh", noBody(func(ctx context.Context, r *http.Request) (SSHTarget, error) {
			item, err := itemParam(r)
			if err != nil {
				return SSHTarget{}, err
			}
			return svc.JobSSH(ctx, r.PathValue("id"), item)
		})},
	}...)
}

// itemParam is the request's ?item=N: an item number.
func itemParam(r *http.Request) (int64, error) {
	s := r.URL.Query().Get("item")
	item, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, FieldErrorf(http.StatusBadRequest, "item", "item: %q is not an item number", Ellipsize(s))
	}
	return item, nil
}

// AddSSHKey records a public key (a FILE.pub's line) for this machine's
// person in the ledger.
func (c *Client) AddSSHKey(ctx context.Context, key string) (SSHKeyInfo, error) {
	return post[SSHKeyInfo](c, ctx, "/v1/user/ssh-keys", SSHKeyAdd{Key: key})
}

// SSHKeys lists this machine's person's SSH keys, in the order added.
func (c *Client) SSHKeys(ctx context.Context) ([]SSHKeyInfo, error) {
	return all[SSHKeyInfo](c, ctx, "/v1/user/ssh-keys")
}

// RemoveSSHKey removes one of the person's keys by its fingerprint.
func (c *Client) RemoveSSHKey(ctx context.Context, fingerprint string) (SSHKeyInfo, error) {
	return post[SSHKeyInfo](c, ctx, "/v1/user/ssh-keys/remove", SSHKeyRemove{Fingerprint: fingerprint})
}

// ContractSSH is where to ssh into a contract's container.
func (c *Client) ContractSSH(ctx context.Context, ref string) (SSHTarget, error) {
	return get[SSHTarget](c, ctx, "/v1/contracts/"+esc(ref)+"/ssh")
}

// JobSSH is where to ssh into the container running item of a job.
func (c *Client) JobSSH(ctx context.Context, ref string, item int64) (SSHTarget, error) {
	q := url.Values{"item": {strconv.FormatInt(item, 10)}}
	return get[SSHTarget](c, ctx, "/v1/jobs/"+esc(ref)+"/ssh?"+q.Encode())
}

// archivePathOf is the API path and query of t's archive.
func archivePathOf(t ArchiveTarget) string {
	q := url.Values{"path": {t.Path}}
	prefix := "/v1/contracts/"
	if t.Job {
		prefix = "/v1/jobs/"
		q.Set("item", strconv.FormatInt(t.Item, 10))
	}
	return prefix + esc(t.Ref) + "/archive?" + q.Encode()
}

// PutArchive sends the tar archive body to be unpacked into directory
// t.Path of t's container. It lasts as long as the archive (ctx bounds
// it).
func (c *Client) PutArchive(ctx context.Context, t ArchiveTarget, body io.Reader) (ArchiveResult, error) {
	resp, err := c.untimed().sendBody(ctx, http.MethodPut, archivePathOf(t), body, "application/x-tar")
	if err != nil {
		return ArchiveResult{}, err
	}
	defer resp.Body.Close()
	var out ArchiveResult
	err = json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&out)
	return out, err
}

// GetArchive is a tar archive of t.Path in t's container, as the node
// streams it; the caller closes it.
func (c *Client) GetArchive(ctx context.Context, t ArchiveTarget) (io.ReadCloser, error) {
	resp, err := c.untimed().sendBody(ctx, http.MethodGet, archivePathOf(t), nil, "")
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// CopyIn copies local (a file, or a directory and everything under it)
// into t.Path of t's container: into it when it is a directory, else to
// that name (PutArchive's rule). The archive streams as it is made.
func (c *Client) CopyIn(ctx context.Context, t ArchiveTarget, local string) (ArchiveResult, error) {
	if _, err := os.Lstat(local); err != nil {
		return ArchiveResult{}, err
	}
	abs, err := filepath.Abs(local)
	if err != nil {
		return ArchiveResult{}, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarcopy.Pack(ctx, pw, abs, filepath.Base(abs))) }()
	res, err := c.PutArchive(ctx, t, pr)
	_ = pr.CloseWithError(io.ErrClosedPipe) // stops Pack if the node answered first
	return res, err
}

// CopyOut copies t.Path of t's container to local: into it when it is a
// directory, else to that name, whose directory must exist. It returns
// the bytes of archive read.
func (c *Client) CopyOut(ctx context.Context, t ArchiveTarget, local string) (int64, error) {
	dir, rename := local, ""
	if fi, err := os.Stat(local); err != nil || !fi.IsDir() {
		dir, rename = filepath.Dir(local), filepath.Base(local)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return 0, fmt.Errorf("%s: no such directory", dir)
		}
	}
	rc, err := c.GetArchive(ctx, t)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	cr := &countReader{r: rc}
	var r io.Reader = cr
	if rename != "" {
		rr := tarcopy.Rename(cr, rename)
		defer rr.Close()
		r = rr
	}
	if err := tarcopy.Unpack(ctx, dir, r); err != nil {
		return cr.n, err
	}
	return cr.n, nil
}

type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}
