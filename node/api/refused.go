package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/cshare/cshare/internal/diskguard"
	"github.com/cshare/cshare/ledger"
)

// Refused turns a fold verdict on a write into an API error: a 403 when
// the writer lacks the authority, a 507 when the node's disk is below its
// reserve (the request was fine, and succeeds once there is room), else a
// 400.
func Refused(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ledger.ErrNotAuthority) || errors.Is(err, ledger.ErrPolicy) {
		return Errorf(http.StatusForbidden, "%s", strings.TrimPrefix(err.Error(), "ledger: "))
	}
	if errors.Is(err, diskguard.ErrFull) {
		var fe *diskguard.FullError
		if errors.As(err, &fe) {
			return Errorf(http.StatusInsufficientStorage, "%s", fe.Error())
		}
		return Errorf(http.StatusInsufficientStorage, "%s", err.Error())
	}
	return Errorf(http.StatusBadRequest, "%s", strings.TrimPrefix(err.Error(), "ledger: "))
}

// NoOrg is the 409 of an action that needs the node in an org.
func NoOrg() error {
	return Errorf(http.StatusConflict, "this node is in no org yet: create one with `cshare org create --name NAME` or join with `cshare node join --org-key KEY`")
}
