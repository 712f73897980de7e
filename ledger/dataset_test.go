package ledger

import (
	"errors"
	"strings"
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

func TestJobDatasetMounts(t *testing.T) {
	w := newWorld(t)
	mem := w.member(3, RoleMember)
	other := w.member(4, RoleMember)
	w.ok(mem, KindDatasetAdd, DatasetAdd{Name: "pub", CID: emptyCID, Size: 0, Blocks: 1, Access: AccessOrg})
	const privCID = "bafkreigrnpjc64mwyctq6sysvifssdcmjlhm2xlluniozscep667jq4btm"
	w.ok(mem, KindDatasetAdd, DatasetAdd{Name: "priv", CID: privCID, Size: 1, Blocks: 1, Access: AccessPrivate})
	spec := func(ms ...DatasetMount) JobSpec {
		return JobSpec{Driver: "exec", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 1, Priority: 5, CPUs: 1,
			Nonce: []byte{byte(w.tick())}, Datasets: ms}
	}
	e := w.ok(other, KindJobSubmit, spec(DatasetMount{Name: "pub", CID: emptyCID, Path: "/data"}))
	if j := w.log.State().Jobs[JobIDFor(e)]; len(j.Spec.Datasets) != 1 || j.Spec.Datasets[0].Path != "/data" {
		t.Fatalf("job mounts %+v", j.Spec.Datasets)
	}
	// A private dataset only its owner (and admins) may mount.
	w.denied(ErrNotAuthority, other, KindJobSubmit, spec(DatasetMount{Name: "priv", CID: privCID, Path: "/data"}))
	w.ok(mem, KindJobSubmit, spec(DatasetMount{Name: "priv", CID: privCID, Path: "/data"}))
	// A CID no dataset has.
	w.denied(ErrNotAuthority, mem, KindJobSubmit, spec(DatasetMount{CID: "bafkreifmuv4hv3zov72xynyt6hy43abjmb4k56lopiserzjwnnruvyibdi", Path: "/x"}))
	for _, bad := range [][]DatasetMount{
		{{CID: emptyCID, Path: "data"}},
		{{CID: emptyCID, Path: "/"}},
		{{CID: emptyCID, Path: "/a/../b"}},
		{{CID: emptyCID, Path: "/a"}, {CID: emptyCID, Path: "/a"}},
		{{CID: "nope", Path: "/a"}},
	} {
		if _, err := w.write(mem, KindJobSubmit, spec(bad...)); !errors.Is(err, ErrMalformed) {
			t.Errorf("mounts %+v: %v, want malformed", bad, err)
		}
	}
}

// TestDatasetAccess: the owner or an admin changes who may read a dataset;
// another member may not; what a member may read follows.
func TestDatasetAccess(t *testing.T) {
	w := newWorld(t)
	admin := w.member(2, RoleAdmin)
	mem := w.member(3, RoleMember)
	other := w.member(4, RoleMember)
	w.ok(mem, KindDatasetAdd, DatasetAdd{Name: "d", CID: emptyCID, Size: 0, Blocks: 1, Access: AccessOrg})
	readable := func() bool { st := w.log.State(); return st.CanReadDataset(other.id, st.Datasets["d"]) }
	if !readable() {
		t.Fatal("an org dataset is not readable by a member")
	}
	w.denied(ErrNotAuthority, other, KindDatasetAccess, DatasetAccess{Name: "d", Access: AccessPrivate})
	w.ok(mem, KindDatasetAccess, DatasetAccess{Name: "d", Access: AccessPrivate})
	if readable() || w.log.State().Datasets["d"].Access != AccessPrivate {
		t.Fatal("private, and still readable by another member")
	}
	w.ok(admin, KindDatasetAccess, DatasetAccess{Name: "d", Access: AccessOrg})
	if !readable() {
		t.Fatal("back to org, and not readable")
	}
	for _, bad := range []DatasetAccess{{Name: "d", Access: "everyone"}, {Name: "nope", Access: AccessOrg}, {Name: "", Access: AccessOrg}} {
		if _, err := w.write(admin, KindDatasetAccess, bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if err := ValidateDatasetAccess(DatasetAccess{Name: "d", Access: "x"}); err == nil || !strings.HasPrefix(err.Error(), "access:") {
		t.Errorf("ValidateDatasetAccess names no field: %v", err)
	}
}
