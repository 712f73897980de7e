package api

import "context"

// DatasetAdd asks the node to import a file or directory it can read (an
// absolute path on the node's machine) and record it in the ledger.
// Progress, when set, is an ID under which the node reports the bytes read
// so far (GET /v1/datasets/progress/{id}).
type DatasetAdd struct {
	Path     string `json:"path"`
	Name     string `json:"name,omitempty"`
	Private  bool   `json:"private,omitempty"`
	Progress string `json:"progress,omitempty"`
}

// DatasetInfo is a dataset as the API shows it. Holders are the online
// machines of the org that hold every block (show only); Local says whether
// this machine does.
type DatasetInfo struct {
	Name      string   `json:"name"`
	CID       string   `json:"cid"`
	Size      int64    `json:"size"`
	Blocks    int64    `json:"blocks"`
	Access    string   `json:"access"`
	Owner     string   `json:"owner"`
	OwnerName string   `json:"owner_name,omitempty"`
	Added     string   `json:"added"`
	Local     bool     `json:"local"`
	Holders   []string `json:"holders,omitempty"`
	// Relayed (dataset get, export) are the machines holding the dataset
	// that this node reaches only through one of the org's relays: its
	// blocks came from them through the relay, or from the others.
	Relayed []string `json:"relayed,omitempty"`
}

// DatasetProgress is how far an import has read.
type DatasetProgress struct {
	Done int64 `json:"done"`
}

// DatasetGet asks the node to fetch a dataset and write it to Out, an
// absolute path on the node's machine that does not exist yet.
type DatasetGet struct {
	Out string `json:"out"`
}

// DatasetImport asks the node to import a CAR file it can read (an absolute
// path on the node's machine) as a dataset.
type DatasetImport struct {
	Path    string `json:"path"`
	Name    string `json:"name,omitempty"`
	Private bool   `json:"private,omitempty"`
}

// DatasetExport asks the node to write a dataset as a CARv1 file at Car, an
// absolute path on the node's machine that does not exist yet.
type DatasetExport struct {
	Car string `json:"car"`
}

// DatasetAccessRequest is POST /v1/datasets/{ref}/access (`cshare dataset
// access REF org|private`): who may read the dataset, every member of the
// org (org) or its owner and the admins (private).
type DatasetAccessRequest struct {
	Access string `json:"access"`
}

// SetDatasetAccess sets who may read a dataset (its owner or an admin).
func (c *Client) SetDatasetAccess(ctx context.Context, ref, access string) (DatasetInfo, error) {
	return post[DatasetInfo](c, ctx, "/v1/datasets/"+esc(ref)+"/access", DatasetAccessRequest{Access: access})
}
