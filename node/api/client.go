package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files in the data dir through which the CLI finds its node.
const (
	AddrFile  = "api.addr"
	TokenFile = "api.token"
	// CertFile is the API's TLS certificate (PEM) when it is served over
	// TLS; api.addr then starts with https://.
	CertFile = "api.cert"
)

// ErrNodeNotRunning says no node answers at the data dir's address.
var ErrNodeNotRunning = errors.New("api: node not running")

// ErrInterrupted says a request's context was cancelled (Ctrl-C) before
// the node answered; it wraps context.Canceled.
var ErrInterrupted = errors.New("api: request interrupted")

// Client is the typed client of a node's API.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// NewClient builds a client for addr (host:port, or https://host:port for
// an API served over TLS) with a bearer token.
func NewClient(addr, token string) *Client {
	return NewTLSClient(addr, token, nil)
}

// NewTLSClient is NewClient that, for an https:// addr, trusts exactly the
// certificate certPEM (the node's own, from its data dir) when it is not
// nil, and the system's roots when it is.
func NewTLSClient(addr, token string, certPEM []byte) *Client {
	base := addr
	if !strings.HasPrefix(addr, "https://") && !strings.HasPrefix(addr, "http://") {
		base = "http://" + addr
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if certPEM != nil {
		tr.TLSClientConfig = pinnedTLS(certPEM)
	}
	return &Client{base: base, token: token, hc: &http.Client{Timeout: 5 * time.Minute, Transport: tr}}
}

// pinnedTLS trusts the one certificate in certPEM, whatever name it
// carries: the CLI dials the address its node wrote, which may be an IP
// the certificate does not name.
func pinnedTLS(certPEM []byte) *tls.Config {
	block, _ := pem.Decode(certPEM)
	var want []byte
	if block != nil {
		want = block.Bytes
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || want == nil || !bytes.Equal(raw[0], want) {
				return errors.New("api: the node's TLS certificate is not the one in its data dir (" + CertFile + ")")
			}
			return nil
		},
	}
}

// DialDataDir reads api.addr and api.token from a data dir. apiOverride, if
// not empty, replaces the address.
func DialDataDir(dataDir, apiOverride string) (*Client, error) {
	tok, err := os.ReadFile(filepath.Join(dataDir, TokenFile))
	if err != nil {
		return nil, fmt.Errorf("%w: no %s in %s; start one with: cshare node run --data-dir %s", ErrNodeNotRunning, TokenFile, dataDir, dataDir)
	}
	addr := apiOverride
	if addr == "" {
		b, err := os.ReadFile(filepath.Join(dataDir, AddrFile))
		if err != nil {
			return nil, fmt.Errorf("%w: no %s in %s; start one with: cshare node run --data-dir %s", ErrNodeNotRunning, AddrFile, dataDir, dataDir)
		}
		addr = strings.TrimSpace(string(b))
	}
	var certPEM []byte
	if strings.HasPrefix(addr, "https://") {
		certPEM, _ = os.ReadFile(filepath.Join(dataDir, CertFile)) // none: the system's roots
	}
	return NewTLSClient(addr, strings.TrimSpace(string(tok)), certPEM), nil
}

// Addr is the API address this client talks to.
func (c *Client) Addr() string { return strings.TrimPrefix(c.base, "http://") }

// Base is the API's URL without a path: http://host:port or https://host:port.
func (c *Client) Base() string { return c.base }

// Token is the bearer token this client sends.
func (c *Client) Token() string { return c.token }

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	resp, err := c.send(ctx, method, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return err
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// maxAnswer caps an answer that is not a listing (listings stream: see
// each).
const maxAnswer = 64 << 20

// send sends a request and returns the answer of a 2xx; any other status
// is a *StatusError carrying the node's message and field.
func (c *Client) send(ctx context.Context, method, path string, in any) (*http.Response, error) {
	if in == nil {
		return c.sendBody(ctx, method, path, nil, "")
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return c.sendBody(ctx, method, path, bytes.NewReader(b), "application/json")
}

// sendBody is send with a body as it is (nil: none) of contentType.
func (c *Client) sendBody(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			// Interrupted (Ctrl-C): the node may well be running, and it
			// drops the request with the connection. (A deadline that
			// passed stays ErrNodeNotRunning: no answer in time.)
			return nil, fmt.Errorf("%w: %s %s: %w", ErrInterrupted, method, path, ctx.Err())
		}
		var ne net.Error
		var oe *net.OpError
		if errors.As(err, &oe) || errors.As(err, &ne) {
			return nil, fmt.Errorf("%w at %s (%v); start it with: cshare node run", ErrNodeNotRunning, c.Addr(), unwrapAll(err))
		}
		return nil, err
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, err
	}
	var e Error
	if json.Unmarshal(data, &e) == nil && e.Error != "" {
		return nil, &StatusError{Code: resp.StatusCode, Msg: e.Error, Field: e.Field}
	}
	return nil, &StatusError{Code: resp.StatusCode, Msg: fmt.Sprintf("%s %s: %s", method, path, resp.Status)}
}

// each reads a listing (see Page) row by row as the node writes it and
// calls fn for each: it holds one row at a time, whatever the listing's
// size. The listing's time is bounded by ctx alone (it lasts as long as
// its rows). An error of fn stops it.
func each[T any](c *Client, ctx context.Context, path string, p Page, fn func(T) error) error {
	if q := p.query(); len(q) > 0 {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + q.Encode()
	}
	resp, err := c.untimed().send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	broken := func(rows int, err error) error {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("api: GET %s: the node's answer broke off after %d rows: %w", Ellipsize(path), rows, err)
	}
	dec := json.NewDecoder(resp.Body)
	if t, err := dec.Token(); err != nil {
		return broken(0, err)
	} else if t != json.Delim('[') {
		return fmt.Errorf("api: GET %s: the node's answer is not a JSON array", Ellipsize(path))
	}
	rows := 0
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return broken(rows, err)
		}
		if err := fn(v); err != nil {
			return err
		}
		rows++
	}
	if _, err := dec.Token(); err != nil {
		return broken(rows, err)
	}
	return nil
}

// all reads a whole listing into a slice (an empty one, not nil, for no
// rows).
func all[T any](c *Client, ctx context.Context, path string) ([]T, error) {
	out := []T{}
	err := each(c, ctx, path, Page{}, func(v T) error { out = append(out, v); return nil })
	return out, err
}

func unwrapAll(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func get[T any](c *Client, ctx context.Context, path string) (T, error) {
	var v T
	err := c.do(ctx, http.MethodGet, path, nil, &v)
	return v, err
}

func post[T any](c *Client, ctx context.Context, path string, in any) (T, error) {
	var v T
	err := c.do(ctx, http.MethodPost, path, in, &v)
	return v, err
}

func esc(s string) string { return url.PathEscape(s) }

// Status is GET /v1/status.
func (c *Client) Status(ctx context.Context) (NodeStatus, error) {
	return get[NodeStatus](c, ctx, "/v1/status")
}

// Stop asks the node to stop.
func (c *Client) Stop(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/v1/node/stop", nil, nil)
}

// CreateOrg creates an org with this node as owner.
func (c *Client) CreateOrg(ctx context.Context, req OrgCreate) (KeyResult, error) {
	return post[KeyResult](c, ctx, "/v1/org", req)
}

// Org shows the org.
func (c *Client) Org(ctx context.Context) (OrgInfo, error) { return get[OrgInfo](c, ctx, "/v1/org") }

// OrgKey prints the org key, or rotates it.
func (c *Client) OrgKey(ctx context.Context, rotate bool) (KeyResult, error) {
	if rotate {
		return post[KeyResult](c, ctx, "/v1/org/key/rotate", nil)
	}
	return get[KeyResult](c, ctx, "/v1/org/key")
}

// Invite issues an invite code.
func (c *Client) Invite(ctx context.Context, req InviteRequest) (KeyResult, error) {
	return post[KeyResult](c, ctx, "/v1/org/invite", req)
}

// SetSettings changes org settings.
func (c *Client) SetSettings(ctx context.Context, req SettingsRequest) (OrgInfo, error) {
	return post[OrgInfo](c, ctx, "/v1/org/settings", req)
}

// TransferOrg makes person to (a reference) the org's owner.
func (c *Client) TransferOrg(ctx context.Context, to string) (OrgInfo, error) {
	return post[OrgInfo](c, ctx, "/v1/org/transfer", TransferRequest{To: to})
}

// Join joins this node to an org.
func (c *Client) Join(ctx context.Context, req JoinRequest) (JoinResult, error) {
	return post[JoinResult](c, ctx, "/v1/join", req)
}

// Machines lists machines.
func (c *Client) Machines(ctx context.Context) ([]MachineInfo, error) {
	return all[MachineInfo](c, ctx, "/v1/machines")
}

// EachMachine reads a page of the machines, one at a time.
func (c *Client) EachMachine(ctx context.Context, p Page, fn func(MachineInfo) error) error {
	return each(c, ctx, "/v1/machines", p, fn)
}

// Machine shows one machine.
func (c *Client) Machine(ctx context.Context, id string) (MachineInfo, error) {
	return get[MachineInfo](c, ctx, "/v1/machines/"+esc(id))
}

// MachineAction approves, rejects or removes a machine.
func (c *Client) MachineAction(ctx context.Context, id, action string) (MachineInfo, error) {
	return post[MachineInfo](c, ctx, "/v1/machines/"+esc(id)+"/"+esc(action), nil)
}

// Members lists members.
func (c *Client) Members(ctx context.Context) ([]MemberInfo, error) {
	return all[MemberInfo](c, ctx, "/v1/members")
}

// EachMember reads a page of the members, one at a time.
func (c *Client) EachMember(ctx context.Context, p Page, fn func(MemberInfo) error) error {
	return each(c, ctx, "/v1/members", p, fn)
}

// SetRole sets a member's role.
func (c *Client) SetRole(ctx context.Context, id, role string) (MemberInfo, error) {
	return post[MemberInfo](c, ctx, "/v1/members/"+esc(id)+"/role", RoleRequest{Role: role})
}

// RemoveMember removes a member by ID, unique ID prefix/suffix or name, and
// returns its full ID.
func (c *Client) RemoveMember(ctx context.Context, id string) (string, error) {
	r, err := post[RemoveResult](c, ctx, "/v1/members/"+esc(id)+"/remove", nil)
	return r.ID, err
}

// Leave leaves the org: this machine's person is removed from it, and the
// node starts again in no org; purge deletes the org's data here.
func (c *Client) Leave(ctx context.Context, purge bool) (LeftOrg, error) {
	return post[LeftOrg](c, ctx, "/v1/leave", LeaveRequest{Purge: purge})
}

// DeleteOrg deletes the org (the owner only; confirm is its name): every
// node of it leaves it.
func (c *Client) DeleteOrg(ctx context.Context, confirm string, purge bool) (LeftOrg, error) {
	return post[LeftOrg](c, ctx, "/v1/org/delete", OrgDeleteRequest{Confirm: confirm, Purge: purge})
}

// SubmitJob submits a job; the answer carries the job and any warnings.
func (c *Client) SubmitJob(ctx context.Context, req JobSubmit) (JobSubmitted, error) {
	return post[JobSubmitted](c, ctx, "/v1/jobs", req)
}

// Jobs lists jobs.
func (c *Client) Jobs(ctx context.Context) ([]JobInfo, error) {
	return all[JobInfo](c, ctx, "/v1/jobs")
}

// EachJob reads a page of the jobs, one at a time.
func (c *Client) EachJob(ctx context.Context, p Page, fn func(JobInfo) error) error {
	return each(c, ctx, "/v1/jobs", p, fn)
}

// Job shows a job.
func (c *Client) Job(ctx context.Context, id string) (JobInfo, error) {
	return get[JobInfo](c, ctx, "/v1/jobs/"+esc(id))
}

// JobItems lists a job's agenda items, all of them: for a large job,
// prefer EachJobItem.
func (c *Client) JobItems(ctx context.Context, id string) ([]ItemInfo, error) {
	return all[ItemInfo](c, ctx, "/v1/jobs/"+esc(id)+"/items")
}

// EachJobItem reads a page of a job's agenda items, one at a time.
func (c *Client) EachJobItem(ctx context.Context, id string, p Page, fn func(ItemInfo) error) error {
	return each(c, ctx, "/v1/jobs/"+esc(id)+"/items", p, fn)
}

// ModifyJob changes a job's max_cpus or priority.
func (c *Client) ModifyJob(ctx context.Context, id string, req JobModify) (JobInfo, error) {
	return post[JobInfo](c, ctx, "/v1/jobs/"+esc(id)+"/modify", req)
}

// CancelJob cancels a job.
func (c *Client) CancelJob(ctx context.Context, id string) (JobInfo, error) {
	return post[JobInfo](c, ctx, "/v1/jobs/"+esc(id)+"/cancel", nil)
}

// JobLogs returns one item's output.
func (c *Client) JobLogs(ctx context.Context, id string, item int64) ([]byte, error) {
	var out []byte
	err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/jobs/%s/logs?item=%d", esc(id), item), nil, &out)
	return out, err
}

// CreateOffer signs and publishes an offer for part of this machine.
func (c *Client) CreateOffer(ctx context.Context, req OfferCreate) (OfferInfo, error) {
	return post[OfferInfo](c, ctx, "/v1/offers", req)
}

// Offers lists the org's open offers matching query (the market's query
// language), sorted by order ("price,gpus-").
func (c *Client) Offers(ctx context.Context, query, order string) ([]OfferInfo, error) {
	return all[OfferInfo](c, ctx, "/v1/offers?"+url.Values{"q": {query}, "o": {order}}.Encode())
}

// EachOffer reads a page of Offers(query, order), one at a time.
func (c *Client) EachOffer(ctx context.Context, query, order string, p Page, fn func(OfferInfo) error) error {
	return each(c, ctx, "/v1/offers?"+url.Values{"q": {query}, "o": {order}}.Encode(), p, fn)
}

// RemoveOffer withdraws one of this machine's offers.
func (c *Client) RemoveOffer(ctx context.Context, id string) (OfferInfo, error) {
	return post[OfferInfo](c, ctx, "/v1/offers/"+esc(id)+"/remove", nil)
}

// AddDataset imports a path on the node's machine as a dataset.
func (c *Client) AddDataset(ctx context.Context, req DatasetAdd) (DatasetInfo, error) {
	return post[DatasetInfo](c.untimed(), ctx, "/v1/datasets", req)
}

// untimed is c without the client's overall timeout, for calls that last as
// long as the data they move (ctx bounds them).
func (c *Client) untimed() *Client {
	lc := *c
	hc := *c.hc
	hc.Timeout = 0
	lc.hc = &hc
	return &lc
}

// DatasetProgress is how far the import with progress ID id has read.
func (c *Client) DatasetProgress(ctx context.Context, id string) (DatasetProgress, error) {
	return get[DatasetProgress](c, ctx, "/v1/datasets/progress/"+esc(id))
}

// Datasets lists the datasets this person may read.
func (c *Client) Datasets(ctx context.Context) ([]DatasetInfo, error) {
	return all[DatasetInfo](c, ctx, "/v1/datasets")
}

// EachDataset reads a page of the datasets, one at a time.
func (c *Client) EachDataset(ctx context.Context, p Page, fn func(DatasetInfo) error) error {
	return each(c, ctx, "/v1/datasets", p, fn)
}

// Dataset shows a dataset by name or CID.
func (c *Client) Dataset(ctx context.Context, ref string) (DatasetInfo, error) {
	return get[DatasetInfo](c, ctx, "/v1/datasets/"+esc(ref))
}

// RemoveDataset removes a dataset by name or CID.
func (c *Client) RemoveDataset(ctx context.Context, ref string) (DatasetInfo, error) {
	return post[DatasetInfo](c, ctx, "/v1/datasets/"+esc(ref)+"/remove", nil)
}

// GetDataset fetches a dataset and writes it out on the node's machine.
func (c *Client) GetDataset(ctx context.Context, ref string, req DatasetGet) (DatasetInfo, error) {
	return post[DatasetInfo](c.untimed(), ctx, "/v1/datasets/"+esc(ref)+"/get", req)
}

// ImportDataset imports a CAR file on the node's machine as a dataset.
func (c *Client) ImportDataset(ctx context.Context, req DatasetImport) (DatasetInfo, error) {
	return post[DatasetInfo](c.untimed(), ctx, "/v1/datasets/import", req)
}

// ExportDataset writes a dataset as a CAR file on the node's machine.
func (c *Client) ExportDataset(ctx context.Context, ref string, req DatasetExport) (DatasetInfo, error) {
	return post[DatasetInfo](c.untimed(), ctx, "/v1/datasets/"+esc(ref)+"/export", req)
}
