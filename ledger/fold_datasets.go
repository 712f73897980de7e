package ledger

import (
	"fmt"

	"github.com/cshare/cshare/internal/text"
)

// Datasets in the fold: adding and removing them, who may read them, and
// which a job may mount.

// ValidateDatasetAdd checks a dataset.add payload's values.
func ValidateDatasetAdd(p DatasetAdd) error {
	if err := text.CheckName("name", p.Name); err != nil {
		return err
	}
	if _, err := CheckDatasetCID("cid", p.CID); err != nil {
		return err
	}
	if p.Size < 0 || p.Size > MaxDatasetSize {
		return fmt.Errorf("size: %d; allowed: 0..%d bytes (1 PiB)", p.Size, int64(MaxDatasetSize))
	}
	if p.Blocks < 1 || p.Blocks > MaxDatasetBlocks {
		return fmt.Errorf("blocks: %d; allowed: 1..%d", p.Blocks, int64(MaxDatasetBlocks))
	}
	return checkAccess(p.Access)
}

func checkAccess(a string) error {
	if a != AccessOrg && a != AccessPrivate {
		return fmt.Errorf("access: %q; allowed: org, private", a)
	}
	return nil
}

// ValidateDatasetAccess checks a dataset.access payload's values.
func ValidateDatasetAccess(p DatasetAccess) error {
	if err := text.CheckName("name", p.Name); err != nil {
		return err
	}
	return checkAccess(p.Access)
}

// foldDatasetAccess: the dataset's owner or an admin sets who may read it
// (org: every member; private: its owner and the admins). Jobs already
// submitted keep their mounts; a new job's mounts are checked against the
// access at its submission (checkJobDatasets), and blocks are served by
// the access at the time they are asked for.
func foldDatasetAccess(st *State, e *Entry, _, person string) error {
	var p DatasetAccess
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	if err := ValidateDatasetAccess(p); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	d := st.Datasets[p.Name]
	if d == nil {
		return fmt.Errorf("%w: unknown dataset %q", ErrMalformed, p.Name)
	}
	if d.Owner != person && !st.IsAdmin(person) {
		return denied("only the dataset's owner or an admin may change who reads dataset %q", p.Name)
	}
	c := *d
	c.Access = p.Access
	st.datasetsW()[p.Name] = &c
	return nil
}

// foldDatasetAdd: a member adds a dataset its machine holds, under a name
// no other dataset has.
func foldDatasetAdd(st *State, e *Entry, author, person string) error {
	var p DatasetAdd
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	if err := ValidateDatasetAdd(p); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if st.Datasets[p.Name] != nil {
		return fmt.Errorf("%w: dataset name %q is taken", ErrMalformed, p.Name)
	}
	st.datasetsW()[p.Name] = &Dataset{Name: p.Name, CID: p.CID, Size: p.Size, Blocks: p.Blocks, Access: p.Access,
		Owner: person, Machine: author, Added: e.Time}
	return nil
}

// foldDatasetRm: the dataset's owner or an admin removes it.
func foldDatasetRm(st *State, e *Entry, _, person string) error {
	var p DatasetRef
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	d := st.Datasets[p.Name]
	if d == nil {
		return fmt.Errorf("%w: unknown dataset %q", ErrMalformed, p.Name)
	}
	if d.Owner != person && !st.IsAdmin(person) {
		return denied("only the dataset's owner or an admin may remove dataset %q", p.Name)
	}
	delete(st.datasetsW(), p.Name)
	st.DatasetsRemoved = append(st.DatasetsRemoved, DatasetSpan{Owner: d.Owner, Size: d.Size, Added: d.Added, Removed: max(e.Time, d.Added)})
	return nil
}

// checkJobDatasets: every mounted CID is the root of a dataset the submitter
// may read.
func checkJobDatasets(st *State, person string, ms []DatasetMount) error {
	for _, m := range ms {
		ok := false
		for _, d := range st.DatasetsByCID(m.CID) {
			if st.CanReadDataset(person, d) {
				ok = true
				break
			}
		}
		if !ok {
			return denied("job mounts %s, which is not a dataset its submitter may read", m.CID)
		}
	}
	return nil
}
