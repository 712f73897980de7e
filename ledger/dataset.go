package ledger

import (
	"fmt"
	"path"
	"sort"

	"github.com/cshare/cshare/internal/text"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// Dataset access: the whole org, or only its owner and the admins.
const (
	AccessOrg     = "org"
	AccessPrivate = "private"
)

// DatasetAdd is a dataset.add payload: a UnixFS DAG whose blocks the author
// machine holds, under a name no other dataset has.
type DatasetAdd struct {
	Name   string `cbor:"name"`
	CID    string `cbor:"cid"`
	Size   int64  `cbor:"size"`
	Blocks int64  `cbor:"blocks"`
	Access string `cbor:"access"`
}

// DatasetAccess changes who may read a dataset (dataset.access): its
// owner or an admin sets Access to org or private.
type DatasetAccess struct {
	Name   string `cbor:"name"`
	Access string `cbor:"access"`
}

// DatasetRef names a dataset by its name (dataset.rm).
type DatasetRef struct {
	Name string `cbor:"name"`
}

// Dataset is a dataset as the ledger knows it. Owner is the person who added
// it; Machine the machine that first held its blocks.
type Dataset struct {
	Name    string `cbor:"name"`
	CID     string `cbor:"cid"`
	Size    int64  `cbor:"size"`
	Blocks  int64  `cbor:"blocks"`
	Access  string `cbor:"access"`
	Owner   string `cbor:"owner"`
	Machine string `cbor:"machine"`
	Added   int64  `cbor:"added"`
}

// CheckDatasetCID checks a dataset root: a CIDv1 of a dag-pb or raw block
// hashed with sha2-256, as the importer makes them. field names it in the
// error.
func CheckDatasetCID(field, s string) (cid.Cid, error) {
	c, err := cid.Decode(s)
	if err != nil {
		return cid.Undef, fmt.Errorf("%s: %q is not a CID; allowed: a CIDv1, as cshare dataset add prints it", field, s)
	}
	if c.Version() != 1 || (c.Type() != cid.DagProtobuf && c.Type() != cid.Raw) || c.Prefix().MhType != multihash.SHA2_256 {
		return cid.Undef, fmt.Errorf("%s: %s is not a sha2-256 CIDv1 of dag-pb or raw; allowed: what `cshare dataset add` prints", field, s)
	}
	return c, nil
}

// CanReadDataset reports whether person may read d: everyone of the org for
// org-wide datasets, the owner and admins for private ones.
func (s *State) CanReadDataset(person string, d *Dataset) bool {
	if s.Members[person] == nil {
		return false
	}
	return d.Access == AccessOrg || d.Owner == person || s.IsAdmin(person)
}

// SortedDatasets lists datasets by name.
func (s *State) SortedDatasets() []*Dataset {
	out := make([]*Dataset, 0, len(s.Datasets))
	for _, d := range s.Datasets {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// DatasetsByCID lists the datasets whose root is c, by name.
func (s *State) DatasetsByCID(c string) []*Dataset {
	var out []*Dataset
	for _, d := range s.SortedDatasets() {
		if d.CID == c {
			out = append(out, d)
		}
	}
	return out
}

func cloneDatasets(m map[string]*Dataset) map[string]*Dataset {
	if m == nil {
		return nil
	}
	out := make(map[string]*Dataset, len(m))
	for k, v := range m {
		d := *v
		out[k] = &d
	}
	return out
}

// DatasetMount mounts a dataset into a job's instances, read-only, at Path.
// Name is the dataset's name when the job was submitted (for people to
// read); CID is what is mounted.
type DatasetMount struct {
	Name string `cbor:"name" json:"name"`
	CID  string `cbor:"cid" json:"cid"`
	Path string `cbor:"path" json:"path"`
}

// MaxDatasetMounts bounds a job's dataset mounts.
const MaxDatasetMounts = 16

// ValidateDatasetMounts checks a job's dataset mounts: a valid root CID each,
// an absolute clean mount path other than /, no path twice.
func ValidateDatasetMounts(ms []DatasetMount) error {
	if len(ms) > MaxDatasetMounts {
		return fmt.Errorf("datasets: %d mounts; allowed: at most %d", len(ms), MaxDatasetMounts)
	}
	seen := map[string]bool{}
	for i, m := range ms {
		field := fmt.Sprintf("datasets[%d]", i)
		if _, err := CheckDatasetCID(field+".cid", m.CID); err != nil {
			return err
		}
		if m.Name != "" {
			if err := text.CheckName(field+".name", m.Name); err != nil {
				return err
			}
		}
		if err := CheckMountPath(field+".path", m.Path); err != nil {
			return err
		}
		if seen[m.Path] {
			return fmt.Errorf("%s.path: %s is mounted twice; allowed: one dataset per path", field, text.Quote(m.Path))
		}
		seen[m.Path] = true
	}
	return nil
}

// CheckMountPath checks a mount path: absolute, clean, not /, one line.
func CheckMountPath(field, p string) error {
	if p == "" || p[0] != '/' {
		return fmt.Errorf("%s: %s is not absolute; allowed: an absolute path such as /data", field, text.Quote(p))
	}
	if p == "/" || path.Clean(p) != p || len(p) > 256 {
		return fmt.Errorf("%s: %s; allowed: a clean absolute path other than /, at most 256 bytes", field, text.Quote(p))
	}
	for _, r := range p {
		if text.Unsafe(r) || r == ':' || r == ',' {
			return fmt.Errorf("%s: %s holds %U; allowed: printable characters other than : and ,", field, text.Quote(p), r)
		}
	}
	return nil
}
