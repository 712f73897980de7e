package api

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/cshare/cshare/ledger/jobspec"
)

// ContractCreate is POST /v1/contracts: a rental request for part of an
// offer (written as contract.request; the host's node answers it).
type ContractCreate struct {
	Offer   string            `json:"offer"` // an offer ID, or a unique prefix or suffix of one
	Image   string            `json:"image"`
	GPUs    int64             `json:"gpus,omitempty"`
	CPUs    int64             `json:"cpus,omitempty"`
	DiskMB  int64             `json:"disk_mb,omitempty"`
	ForMS   int64             `json:"for_ms,omitempty"` // 0: until the offer ends
	Env     map[string]string `json:"env,omitempty"`
	OnStart string            `json:"onstart,omitempty"`
	Cmd     []string          `json:"cmd,omitempty"`
	// SSHKey is a public key (a FILE.pub's line) that enters this
	// contract alone through the SSH gateway, beside the renter's keys.
	SSHKey string `json:"ssh_key,omitempty"`
	// Mode is entrypoint ("" the same) or ssh; Entrypoint replaces the
	// image's (Cmd are its arguments).
	Mode       string `json:"mode,omitempty"`
	Entrypoint string `json:"entrypoint,omitempty"`
	// RegistryAuth is registry credentials sealed with age to the offer's
	// host (internal/regauth.Seal): the CLI seals them, the node passes
	// them on as they are.
	RegistryAuth []byte `json:"registry_auth,omitempty"`
	// Direct (mode jupyter): publish Jupyter's port on the host instead
	// of proxying it.
	Direct bool `json:"direct,omitempty"`
}

// ContractExtendRequest is POST /v1/contracts/{id}/extend (the host's).
type ContractExtendRequest struct {
	ForMS int64 `json:"for_ms"`
}

// ContractInfo is a contract as `contract show` prints it, read from the
// ledger at the node's now. Times are RFC 3339 ("" before the host
// accepts); money is dollars; gpus is the number of devices, gpu_devices
// their indices on the host.
type ContractInfo struct {
	ID              string  `json:"id"`
	Offer           string  `json:"offer"`
	Host            string  `json:"host"`
	HostName        string  `json:"host_name"`
	Machine         string  `json:"machine"`
	MachineName     string  `json:"machine_name"`
	Renter          string  `json:"renter"`
	RenterName      string  `json:"renter_name"`
	State           string  `json:"state"`
	GPUs            int     `json:"gpus"`
	GPUDevices      []int64 `json:"gpu_devices"`
	CPUs            float64 `json:"cpus"`
	MemoryMB        int64   `json:"memory_mb"`
	ShmMB           int64   `json:"shm_mb"`
	DiskMB          int64   `json:"disk_mb"`
	CPUCeiling      float64 `json:"cpu_ceiling"`
	MemoryCeilingMB int64   `json:"memory_ceiling_mb"`
	OOMRisk         string  `json:"oom_risk"`
	Requested       string  `json:"requested"`
	Start           string  `json:"start"`
	End             string  `json:"end"`
	Price           float64 `json:"price"`      // dollars per hour
	DiskPrice       float64 `json:"disk_price"` // dollars per GB-month
	Cost            float64 `json:"cost"`       // dollars: compute + storage
	ComputeCost     float64 `json:"compute_cost"`
	StorageCost     float64 `json:"storage_cost"`
	// RunningSeconds is how long it has run, as billed (by the second,
	// from the host's acknowledgements; market/billing.go).
	RunningSeconds float64           `json:"running_seconds"`
	Reason         string            `json:"reason"`
	Image          string            `json:"image"`
	Env            map[string]string `json:"env,omitempty"`
	Cmd            []string          `json:"cmd,omitempty"`
	OnStart        string            `json:"onstart,omitempty"`
	Mode           string            `json:"mode"`
	Entrypoint     string            `json:"entrypoint,omitempty"`
	// RegistryAuth: the contract carries sealed registry credentials
	// (never shown).
	RegistryAuth bool `json:"registry_auth,omitempty"`
	// Direct: a jupyter-mode contract's Jupyter is published on a port of
	// the host, not proxied. JupyterURL is where its renter opens it, with
	// its token (shown to the renter alone, while it runs).
	Direct     bool   `json:"direct,omitempty"`
	JupyterURL string `json:"jupyter_url,omitempty"`
}

// UsageAccount is one person's sum over contracts in `contract usage`.
type UsageAccount struct {
	Person      string  `json:"person"`
	Name        string  `json:"name"`
	Contracts   int     `json:"contracts"`
	Cost        float64 `json:"cost"`
	ComputeCost float64 `json:"compute_cost"`
	StorageCost float64 `json:"storage_cost"`
}

// ContractUsage is contract costs summed per renter and per host at At
// (RFC 3339), computed from the ledger: every node prints the same figures
// for the same At.
type ContractUsage struct {
	At      string         `json:"at"`
	Renters []UsageAccount `json:"renters"`
	Hosts   []UsageAccount `json:"hosts"`
}

// Contract actions of POST /v1/contracts/{id}/{action}.
const (
	ContractStop  = "stop"
	ContractStart = "start"
	ContractRm    = "rm"
)

// contractRoutes is the contracts' part of the market's routes.
func contractRoutes(svc MarketAPI) []route {
	return []route{
		{"POST /v1/contracts", decoded(func(ctx context.Context, req ContractCreate) (ContractInfo, error) {
			if err := jobspec.CheckSpecText(req.Cmd, req.Env); err != nil {
				return ContractInfo{}, BadRequest(err)
			}
			return svc.CreateContract(ctx, req)
		})},
		{"GET /v1/contracts", whole(func(c ContractInfo) string { return c.ID }, svc.Contracts)},
		{"GET /v1/contract-usage", noBody(func(ctx context.Context, r *http.Request) (ContractUsage, error) {
			var at int64
			if s := r.URL.Query().Get("at"); s != "" {
				v, err := strconv.ParseInt(s, 10, 64)
				if err != nil || v <= 0 {
					return ContractUsage{}, FieldErrorf(http.StatusBadRequest, "at", "at: %q; a positive unix time in ms", Ellipsize(s))
				}
				at = v
			}
			return svc.ContractUsage(ctx, at)
		})},
		{"GET /v1/contracts/{id}", onPath("id", svc.Contract)},
		{"POST /v1/contracts/{id}/extend", onPathBody("id", svc.ExtendContract)},
		{"POST /v1/contracts/{id}/{action}", noBody(func(ctx context.Context, r *http.Request) (ContractInfo, error) {
			switch a := r.PathValue("action"); a {
			case ContractStop, ContractStart, ContractRm:
				return svc.ContractAction(ctx, r.PathValue("id"), a)
			default:
				return ContractInfo{}, FieldErrorf(http.StatusNotFound, "action", "contract action %q; allowed: stop, start, rm, extend", Ellipsize(a))
			}
		})},
	}
}

// CreateContract requests part of an offer; the answer carries the new
// contract's ID (state requested until the host answers).
func (c *Client) CreateContract(ctx context.Context, req ContractCreate) (ContractInfo, error) {
	return post[ContractInfo](c, ctx, "/v1/contracts", req)
}

// Contracts lists the org's contracts, in ledger order.
func (c *Client) Contracts(ctx context.Context) ([]ContractInfo, error) {
	return all[ContractInfo](c, ctx, "/v1/contracts")
}

// EachContract reads a page of the contracts, one at a time.
func (c *Client) EachContract(ctx context.Context, p Page, fn func(ContractInfo) error) error {
	return each(c, ctx, "/v1/contracts", p, fn)
}

// Contract shows one contract.
func (c *Client) Contract(ctx context.Context, id string) (ContractInfo, error) {
	return get[ContractInfo](c, ctx, "/v1/contracts/"+esc(id))
}

// ContractAction stops, starts or removes a contract (ContractStop, ...).
func (c *Client) ContractAction(ctx context.Context, id, action string) (ContractInfo, error) {
	return post[ContractInfo](c, ctx, "/v1/contracts/"+esc(id)+"/"+esc(action), nil)
}

// ExtendContract moves a contract's end (its host only).
func (c *Client) ExtendContract(ctx context.Context, id string, req ContractExtendRequest) (ContractInfo, error) {
	return post[ContractInfo](c, ctx, "/v1/contracts/"+esc(id)+"/extend", req)
}

// ContractUsage sums contract costs per renter and per host at at (unix
// ms; 0: now).
func (c *Client) ContractUsage(ctx context.Context, at int64) (ContractUsage, error) {
	q := ""
	if at > 0 {
		q = "?" + url.Values{"at": {strconv.FormatInt(at, 10)}}.Encode()
	}
	return get[ContractUsage](c, ctx, "/v1/contract-usage"+q)
}
