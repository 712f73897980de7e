package node

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cshare/cshare/node/api"
)

// TestOwnerMessages: the owner joining its own org is told it is already
// a member; the owner leaving (or being removed) is told the owner must
// remain, and pointed at no command that does not exist.
func TestOwnerMessages(t *testing.T) {
	m := newMesh(t, meshConfig{n: 2, interval: 250 * time.Millisecond})
	key := m.formOrg()
	owner, other := m.nodes[0].Node, m.nodes[1].Node
	ctx := ctxT(t)
	for _, n := range []*Node{owner, other} {
		_, err := n.Join(ctx, api.JoinRequest{OrgKey: key})
		if statusCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "already a member of org acme") || strings.Contains(err.Error(), "bootstrap") {
			t.Errorf("join of its own org: %v; want a 409 saying it is already a member", err)
		}
	}
	_, err := owner.Leave(ctx, api.LeaveRequest{})
	if statusCode(err) != http.StatusConflict || err.Error() != "the owner cannot leave: transfer ownership first with cshare org transfer --to PERSON" {
		t.Errorf("owner leave: %v", err)
	}
	_, err = owner.RemoveMember(ctx, owner.ID().String())
	if statusCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "cannot be removed") || strings.Contains(err.Error(), "delete the org") {
		t.Errorf("owner remove: %v", err)
	}
}
