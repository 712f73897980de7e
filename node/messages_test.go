package node

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
)

// TestOwnerMessages: the owner joining its own org is told it is already
// a member; the owner leaving (or being removed) is told to hand ownership
// to an admin first, and pointed at no command that does not exist.
func TestOwnerMessages(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 250 * time.Millisecond})
	key := m.formOrg()
	owner, other := m.nodes[0].Node, m.nodes[1].Node
	ctx := ctxT(t)
	for _, n := range []*Node{owner, other} {
		_, err := n.orgs.Join(ctx, api.JoinRequest{OrgKey: key})
		if statusCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "already a member of org acme") || strings.Contains(err.Error(), "bootstrap") {
			t.Errorf("join of its own org: %v; want a 409 saying it is already a member", err)
		}
	}
	_, err := owner.orgs.Leaving().Leave(ctx, api.LeaveRequest{})
	if statusCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "the owner cannot leave") || !strings.Contains(err.Error(), "cshare org transfer --to") ||
		strings.Contains(err.Error(), "cannot be transferred") {
		t.Errorf("owner leave: %v", err)
	}
	st, _ := owner.Status(ctx)
	_, err = owner.orgs.RemoveMember(ctx, st.Person)
	if statusCode(err) != http.StatusForbidden || !strings.Contains(err.Error(), "the owner cannot remove themselves") || !strings.Contains(err.Error(), "cshare org transfer --to") {
		t.Errorf("owner remove: %v", err)
	}
	_, err = other.orgs.RemoveMember(ctx, st.Person)
	if statusCode(err) != http.StatusForbidden || !strings.Contains(err.Error(), "whom nobody may remove") {
		t.Errorf("a member removing the owner: %v", err)
	}
	// A machine is no member: the reference is told whose machine it is.
	_, err = owner.orgs.RemoveMember(ctx, owner.ID().String())
	if statusCode(err) != http.StatusNotFound || !strings.Contains(err.Error(), "is machine n0") || !strings.Contains(err.Error(), "acts for person") ||
		!strings.Contains(err.Error(), st.Person) {
		t.Errorf("remove a machine as a member: %v", err)
	}
}
