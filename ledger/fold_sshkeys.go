package ledger

import (
	"fmt"
	"slices"
)

// SSH keys in the fold (sshkey.go has their types and checks): a person
// adds and removes their own keys. A person's slice is never changed in
// place: each change stores a new one, so a State copy that shares it
// (Clone, a snapshot) keeps what it had.

// foldSSHKeyAdd: a member adds a public key of their own, at most
// MaxSSHKeys, each once.
func foldSSHKeyAdd(st *State, e *Entry, _, person string) error {
	var p SSHKeyAdd
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	k, err := CheckSSHKey("key", p.Key)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if k.Line != p.Key {
		// One key, one form in the ledger: the node writes the canonical
		// line (CheckSSHKey's), so equal keys compare equal.
		return fmt.Errorf("%w: key: not in canonical form (type, base64, comment, single spaces)", ErrMalformed)
	}
	have := st.SSHKeys[person]
	if st.HasSSHKey(person, k.Fingerprint) {
		return fmt.Errorf("%w: key %s is already one of yours", ErrMalformed, k.Fingerprint)
	}
	if len(have) >= MaxSSHKeys {
		return fmt.Errorf("%w: %d SSH keys already; allowed: at most %d a person (remove one with cshare user ssh-key rm)", ErrMalformed, len(have), MaxSSHKeys)
	}
	st.sshKeysW()[person] = append(slices.Clip(have), SSHKey{Key: k.Line, Fingerprint: k.Fingerprint, Added: e.Time})
	return nil
}

// foldSSHKeyRm: a member removes one of their keys by its fingerprint.
func foldSSHKeyRm(st *State, e *Entry, _, person string) error {
	var p SSHKeyRef
	if err := DecodePayload(e.Payload, &p); err != nil {
		return err
	}
	if err := CheckSSHFingerprint("fingerprint", p.Fingerprint); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	have := st.SSHKeys[person]
	i := slices.IndexFunc(have, func(k SSHKey) bool { return k.Fingerprint == p.Fingerprint })
	if i < 0 {
		return fmt.Errorf("%w: key %s is not one of yours", ErrMalformed, p.Fingerprint)
	}
	if len(have) == 1 {
		delete(st.sshKeysW(), person)
		return nil
	}
	st.sshKeysW()[person] = slices.Delete(slices.Clone(have), i, i+1)
	return nil
}

// dropSSHKeys forgets a removed person's keys: should they be a member
// again, they add keys again.
func dropSSHKeys(st *State, person string) {
	if _, ok := st.SSHKeys[person]; ok {
		delete(st.sshKeysW(), person)
	}
}
