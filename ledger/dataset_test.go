package ledger

import (
	"errors"
	"testing"
)

const emptyCID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"

func TestDatasetAddRm(t *testing.T) {
	w := newWorld(t)
	admin := w.member(2, RoleAdmin)
	mem := w.member(3, RoleMember)
	other := w.member(4, RoleMember)
	add := DatasetAdd{Name: "imagenet", CID: emptyCID, Size: 0, Blocks: 1, Access: AccessOrg}
	w.ok(mem, KindDatasetAdd, add)
	st := w.log.State()
	d := st.Datasets["imagenet"]
	if d == nil || d.Owner != mem.id || d.CID != emptyCID || d.Access != AccessOrg {
		t.Fatalf("dataset %+v", d)
	}
	// A taken name is refused, whoever asks.
	if _, err := w.write(admin, KindDatasetAdd, add); !errors.Is(err, ErrMalformed) {
		t.Fatalf("taken name: %v", err)
	}
	// Another member may not remove it; its owner may.
	w.denied(ErrNotAuthority, other, KindDatasetRm, DatasetRef{Name: "imagenet"})
	w.ok(mem, KindDatasetRm, DatasetRef{Name: "imagenet"})
	if len(w.log.State().Datasets) != 0 {
		t.Fatal("dataset not removed")
	}
	// An admin may remove a member's private dataset, and may read it.
	priv := DatasetAdd{Name: "secret", CID: emptyCID, Size: 0, Blocks: 1, Access: AccessPrivate}
	w.ok(mem, KindDatasetAdd, priv)
	st = w.log.State()
	sd := st.Datasets["secret"]
	if !st.CanReadDataset(mem.id, sd) || !st.CanReadDataset(admin.id, sd) || st.CanReadDataset(other.id, sd) {
		t.Fatal("private dataset readable by the wrong persons")
	}
	w.ok(admin, KindDatasetRm, DatasetRef{Name: "secret"})
	if _, err := w.write(admin, KindDatasetRm, DatasetRef{Name: "secret"}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("rm unknown: %v", err)
	}
}

func TestValidateDatasetAdd(t *testing.T) {
	good := DatasetAdd{Name: "d", CID: emptyCID, Size: 0, Blocks: 1, Access: AccessOrg}
	if err := ValidateDatasetAdd(good); err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]DatasetAdd{
		"name":       {Name: "a\x1b[31m", CID: emptyCID, Blocks: 1, Access: AccessOrg},
		"empty name": {Name: "", CID: emptyCID, Blocks: 1, Access: AccessOrg},
		"cid":        {Name: "d", CID: "nope", Blocks: 1, Access: AccessOrg},
		"cidv0":      {Name: "d", CID: "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH", Blocks: 1, Access: AccessOrg},
		"size":       {Name: "d", CID: emptyCID, Size: -1, Blocks: 1, Access: AccessOrg},
		"blocks":     {Name: "d", CID: emptyCID, Blocks: 0, Access: AccessOrg},
		"access":     {Name: "d", CID: emptyCID, Blocks: 1, Access: "world"},
	} {
		if err := ValidateDatasetAdd(p); err == nil {
			t.Errorf("%s: accepted %+v", name, p)
		}
	}
}
