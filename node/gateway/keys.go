package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/cshare/cshare/ledger"
	"github.com/cshare/cshare/node/api"
)

// The keys API: this machine's person's SSH keys in the ledger
// (sshkey.add, sshkey.rm). Each is checked here first, so a refusal writes
// nothing and names the field; the fold checks it again at its place.

// AddSSHKey records a public key for this machine's person.
func (s *Service) AddSSHKey(ctx context.Context, req api.SSHKeyAdd) (api.SSHKeyInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.SSHKeyInfo{}, err
	}
	k, err := ledger.CheckSSHKey("key", req.Key)
	if err != nil {
		return api.SSHKeyInfo{}, api.FieldErrorf(http.StatusBadRequest, "key", "%v", err)
	}
	me := s.d.Person()
	var have bool
	s.d.Ledger.View(func(st *ledger.State) { have = st.HasSSHKey(me, k.Fingerprint) })
	if have {
		return api.SSHKeyInfo{}, api.FieldErrorf(http.StatusConflict, "key", "key: %s is already one of yours (see cshare user ssh-key ls)", k.Fingerprint)
	}
	e, err := s.d.Ledger.Write(ctx, ledger.KindSSHKeyAdd, ledger.SSHKeyAdd{Key: k.Line})
	if e == nil || err != nil {
		return api.SSHKeyInfo{}, api.Refused(err)
	}
	return keyInfo(ledger.SSHKey{Key: k.Line, Fingerprint: k.Fingerprint, Added: e.Time}), nil
}

// SSHKeys lists this machine's person's keys, in the order added.
func (s *Service) SSHKeys(_ context.Context) ([]api.SSHKeyInfo, error) {
	if err := s.needOrg(); err != nil {
		return nil, err
	}
	me := s.d.Person()
	out := []api.SSHKeyInfo{}
	s.d.Ledger.View(func(st *ledger.State) {
		for _, k := range st.SSHKeysOf(me) {
			out = append(out, keyInfo(k))
		}
	})
	return out, nil
}

// RemoveSSHKey removes one of this machine's person's keys.
func (s *Service) RemoveSSHKey(ctx context.Context, req api.SSHKeyRemove) (api.SSHKeyInfo, error) {
	if err := s.needOrg(); err != nil {
		return api.SSHKeyInfo{}, err
	}
	if err := ledger.CheckSSHFingerprint("fingerprint", req.Fingerprint); err != nil {
		return api.SSHKeyInfo{}, api.FieldErrorf(http.StatusBadRequest, "fingerprint", "%v", err)
	}
	me := s.d.Person()
	var k *ledger.SSHKey
	s.d.Ledger.View(func(st *ledger.State) {
		for _, have := range st.SSHKeysOf(me) {
			if have.Fingerprint == req.Fingerprint {
				k = &have
			}
		}
	})
	if k == nil {
		return api.SSHKeyInfo{}, api.FieldErrorf(http.StatusNotFound, "fingerprint", "fingerprint: %s is none of your keys (see cshare user ssh-key ls)", req.Fingerprint)
	}
	if e, err := s.d.Ledger.Write(ctx, ledger.KindSSHKeyRm, ledger.SSHKeyRef{Fingerprint: req.Fingerprint}); e == nil || err != nil {
		return api.SSHKeyInfo{}, api.Refused(err)
	}
	return keyInfo(*k), nil
}

func keyInfo(k ledger.SSHKey) api.SSHKeyInfo {
	info := api.SSHKeyInfo{Fingerprint: k.Fingerprint, Key: k.Key, Added: api.FormatTime(time.UnixMilli(k.Added))}
	if p, err := ledger.CheckSSHKey("key", k.Key); err == nil {
		info.Type, info.Comment = p.Type, p.Comment
	}
	return info
}
