package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/cshare/cshare/ledger"
)

// Refused turns a fold verdict on a write into an API error: a 403 when
// the writer lacks the authority, else a 400.
func Refused(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ledger.ErrNotAuthority) {
		return Errorf(http.StatusForbidden, "%s", strings.TrimPrefix(err.Error(), "ledger: "))
	}
	return Errorf(http.StatusBadRequest, "%s", strings.TrimPrefix(err.Error(), "ledger: "))
}

// NoOrg is the 409 of an action that needs the node in an org.
func NoOrg() error {
	return Errorf(http.StatusConflict, "this node is in no org yet: create one with `cshare org create --name NAME` or join with `cshare node join --org-key KEY`")
}
