package orgsvc

import (
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/ledger"
)

// TestWitnessBook: the last use held for one joiner is refused to another
// until the holder registers or witnessHold passes; unlimited capabilities
// hold nothing.
func TestWitnessBook(t *testing.T) {
	var b witnessBook
	c := ledger.Capability{Kind: ledger.CapInvite, ID: "i1", Uses: 2}
	t0 := time.Unix(1_000_000, 0)
	reg := map[string]bool{}
	registered := func(id string) bool { return reg[id] }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.hold(c, "a", 1, t0, "n0", registered))
	must(b.hold(c, "a", 1, t0.Add(time.Second), "n0", registered)) // a again
	if err := b.hold(c, "b", 1, t0.Add(time.Second), "n0", registered); err == nil || !strings.Contains(err.Error(), "used 1 of 2 times and machine n0 is witnessing 1 more") {
		t.Fatalf("b while a holds the last use: %v", err)
	}
	reg["a"] = true // a's register arrived: the ledger counts it now
	if err := b.hold(c, "b", 2, t0.Add(2*time.Second), "n0", registered); err == nil {
		t.Fatal("b after the uses ran out: witnessed")
	}
	reg["a"] = false
	must(b.hold(c, "b", 1, t0.Add(2*time.Second), "n0", registered)) // a's hold was dropped
	must(b.hold(c, "c", 0, t0.Add(3*time.Second+witnessHold), "n0", registered))
	if len(b.held) != 1 || len(b.held[capUseKey(c)]) != 1 {
		t.Fatalf("held %v, want only c's hold", b.held)
	}
	u := ledger.Capability{Kind: ledger.CapInvite, ID: "i2"}
	must(b.hold(u, "x", 100, t0, "n0", registered))
	if b.held[capUseKey(u)] != nil {
		t.Fatal("an unlimited invite was held")
	}
}
