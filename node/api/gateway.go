package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
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
}

// gatewayRoutes is the gateway's part of the API's table.
func gatewayRoutes(svc GatewayService) []route {
	return []route{
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
	}
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
