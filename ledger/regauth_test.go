package ledger

import (
	"strings"
	"testing"

	"github.com/cshare/cshare/market"
)

// TestRegistryAuthValidated: the fold's validators take a sealed blob of
// at most 16 KiB on a contract or a docker job, and refuse anything else
// with a line naming registry_auth; an offer's age_recipient must be an
// age X25519 recipient.
func TestRegistryAuthValidated(t *testing.T) {
	sealed := []byte("age-encryption.org/v1\n-> X25519 x\ny\n--- z\n")
	big := append(append([]byte{}, sealed...), make([]byte, 16<<10)...)
	cs := ContractSpec{Image: "r.io/app:1", RegistryAuth: sealed}
	if err := ValidateContractSpec(cs); err != nil {
		t.Fatal(err)
	}
	js := JobSpec{Image: "r.io/app:1", Driver: "docker", Cmd: []string{"true"}, RangeStart: 1, RangeEnd: 1, Priority: 1, CPUs: 1, RegistryAuth: sealed}
	if err := ValidateJobSpec(js); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		blob []byte
		want string
	}{
		{big, "registry_auth: 16426 bytes; at most 16384"},
		{[]byte("alice:s3cret"), "registry_auth: not an age-encrypted blob"},
		{[]byte{}, "registry_auth: not an age-encrypted blob"},
	} {
		cs.RegistryAuth, js.RegistryAuth = tc.blob, tc.blob
		for what, err := range map[string]error{"contract": ValidateContractSpec(cs), "job": ValidateJobSpec(js)} {
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s with %d bytes: %v; want %q", what, len(tc.blob), err, tc.want)
			}
		}
	}
	js.RegistryAuth, js.Driver, js.Image = sealed, "exec", ""
	if err := ValidateJobSpec(js); err == nil || !strings.HasPrefix(err.Error(), "registry_auth: only for the docker driver") {
		t.Errorf("exec job: %v", err)
	}
	o := market.Offer{Machine: "m", CPUs: 1, MemoryMB: 1, Created: 1, Until: 2, AgeRecipient: "age1nope"}
	if err := o.Check(); err == nil || !strings.Contains(err.Error(), "age_recipient: ") {
		t.Errorf("offer with a bad recipient: %v", err)
	}
}
