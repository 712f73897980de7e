package runtime

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cshare/cshare/internal/atomicfile"
)

func newExecID() (RunID, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("runtime: exec: run id: %w", err)
	}
	return RunID(hex.EncodeToString(b[:])), nil
}

// safeName turns an instance ID into a directory name. Names that had to be
// changed get a hash suffix so that distinct IDs stay distinct.
func safeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == s && out != "." && out != ".." && len(out) <= 128 {
		return out
	}
	sum := sha256.Sum256([]byte(s))
	return truncate(strings.Trim(out, "."), 64) + "-" + hex.EncodeToString(sum[:4])
}

// linkMount makes m.Source visible at workDir/m.Target as a symlink.
func linkMount(workDir string, m Mount) error {
	dst := filepath.Join(workDir, filepath.Clean("/"+m.Target))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if cur, err := os.Readlink(dst); err == nil {
		if cur == m.Source {
			return nil
		}
		if err := os.Remove(dst); err != nil {
			return err
		}
	} else if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s exists and is not a symlink", dst)
	}
	return os.Symlink(m.Source, dst)
}

// writeJSONAtomic replaces a run's state.json so that a reader (or a node
// after a kill) sees the old or the new content, never a torn one. It is
// not synced to disk: what it describes, a process, does not outlive a
// power loss either, and a sync on every run's start cost short items more
// than their run (List skips a state torn by a power loss).
func writeJSONAtomic(path string, v any) error {
	b, err := stateJSON(v)
	if err != nil {
		return fmt.Errorf("runtime: exec: encode %s: %w", filepath.Base(path), err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("runtime: exec: write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a failure; gone once renamed
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("runtime: exec: write %s: %w", path, err)
	}
	return nil
}

// stateJSON is the content of a state.json.
func stateJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(b, '\n'), err
}

// writeFileAtomic replaces a run's file so that a reader (or a node after
// a crash) sees the old or the new content, never a torn one.
func writeFileAtomic(path string, b []byte) error {
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("runtime: exec: %w", err)
	}
	return nil
}
