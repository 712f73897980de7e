package api

import "context"

// Services are what serve the API's routes: one interface for each of the
// node's services (docs/design.md §3.1), each implemented by that service
// itself, so the node hands them over and delegates nothing. Errors of type
// *StatusError carry their HTTP status; any other error is a 500. Every
// field is required.
//
// A new service's routes come with a new interface here, its field in
// Services and its part of Handler's table (server.go).
type Services struct {
	Node     NodeAPI        // the node itself (package node)
	Org      OrgAPI         // node/orgsvc.Service
	Leave    LeaveAPI       // node/orgsvc.Leaving
	Jobs     JobsAPI        // node/jobsvc.Service
	Market   MarketAPI      // node/marketsvc.Service
	Datasets DatasetsAPI    // node/datasetsvc.Service
	Usage    UsageService   // node/orgsvc.Service: org usage (nil: not served)
	History  HistoryAPI     // node/orgsvc.History: the ledger's history (nil: not served)
	Gateway  GatewayService // node/gateway.Service: SSH keys, file copy (nil: not served)
	// Dashboard: node/web.Dashboard, its sign-in codes (nil: not served)
	Dashboard DashboardService
	Events    EventsAPI // node/events.Bus: GET /v1/events (nil: not served)
	Tokens    TokensAPI // api.Tokens: API access tokens (nil: not served)
}

// NodeAPI is the node's own status, and the request to stop it.
type NodeAPI interface {
	Status(ctx context.Context) (NodeStatus, error)
	Stop(ctx context.Context) error
}

// OrgAPI is the org, its machines and its members.
type OrgAPI interface {
	CreateOrg(ctx context.Context, req OrgCreate) (KeyResult, error)
	Org(ctx context.Context) (OrgInfo, error)
	OrgKey(ctx context.Context, rotate bool) (KeyResult, error)
	Invite(ctx context.Context, req InviteRequest) (KeyResult, error)
	SetSettings(ctx context.Context, req SettingsRequest) (OrgInfo, error)
	Join(ctx context.Context, req JoinRequest) (JoinResult, error)
	TransferOrg(ctx context.Context, to string) (OrgInfo, error) // to: a person reference

	Machines(ctx context.Context) ([]MachineInfo, error)
	Machine(ctx context.Context, id string) (MachineInfo, error)
	MachineAction(ctx context.Context, id, action string) (MachineInfo, error) // approve | reject | remove

	Members(ctx context.Context) ([]MemberInfo, error)
	SetRole(ctx context.Context, id, role string) (MemberInfo, error)
	RemoveMember(ctx context.Context, id string) (string, error) // the removed member's full ID
}

// LeaveAPI is leaving the org: this machine's person leaves, or the owner
// deletes it.
type LeaveAPI interface {
	Leave(ctx context.Context, req LeaveRequest) (LeftOrg, error)
	DeleteOrg(ctx context.Context, req OrgDeleteRequest) (LeftOrg, error)
}

// JobsAPI is the org's jobs, their items and their output.
type JobsAPI interface {
	SubmitJob(ctx context.Context, req JobSubmit) (JobSubmitted, error)
	// ListJobs emits the jobs this machine's person may see, in submission
	// order, paged by p (the cursor: a job's ID, or any reference to it).
	ListJobs(ctx context.Context, p Page, emit func(JobInfo) error) error
	Job(ctx context.Context, id string) (JobInfo, error)
	// ExplainJob says why the job waits, machine by machine.
	ExplainJob(ctx context.Context, id string) (JobExplain, error)
	ModifyJob(ctx context.Context, id string, req JobModify) (JobInfo, error)
	CancelJob(ctx context.Context, id string) (JobInfo, error)
	JobLogs(ctx context.Context, id string, item int64) ([]byte, error)
	// ListJobItems emits a job's items in order, paged by p (the cursor: an
	// item number). emit must not keep its argument's Runs past its return:
	// the node reuses it for the next item.
	ListJobItems(ctx context.Context, id string, p Page, emit func(ItemInfo) error) error
}

// MarketAPI is the market: offers, and contracts as renter and as host.
type MarketAPI interface {
	CreateOffer(ctx context.Context, req OfferCreate) (OfferInfo, error)
	Offers(ctx context.Context, query, order string) ([]OfferInfo, error)
	RemoveOffer(ctx context.Context, id string) (OfferInfo, error)
	CreateContract(ctx context.Context, req ContractCreate) (ContractInfo, error)
	Contracts(ctx context.Context) ([]ContractInfo, error)
	Contract(ctx context.Context, id string) (ContractInfo, error)
	ContractAction(ctx context.Context, id, action string) (ContractInfo, error) // stop | start | rm
	ExtendContract(ctx context.Context, id string, req ContractExtendRequest) (ContractInfo, error)
	ContractUsage(ctx context.Context, at int64) (ContractUsage, error) // at: unix ms, 0 = now
}

// DatasetsAPI is the org's datasets.
type DatasetsAPI interface {
	AddDataset(ctx context.Context, req DatasetAdd) (DatasetInfo, error)
	DatasetProgress(ctx context.Context, id string) (DatasetProgress, error)
	Datasets(ctx context.Context) ([]DatasetInfo, error)
	Dataset(ctx context.Context, ref string) (DatasetInfo, error) // ref: a name or a CID
	RemoveDataset(ctx context.Context, ref string) (DatasetInfo, error)
	// SetDatasetAccess sets who may read it (its owner or an admin).
	SetDatasetAccess(ctx context.Context, ref string, req DatasetAccessRequest) (DatasetInfo, error)
	GetDataset(ctx context.Context, ref string, req DatasetGet) (DatasetInfo, error)
	ImportDataset(ctx context.Context, req DatasetImport) (DatasetInfo, error)
	ExportDataset(ctx context.Context, ref string, req DatasetExport) (DatasetInfo, error)
}
