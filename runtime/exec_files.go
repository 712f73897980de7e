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

func writeJSONAtomic(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("runtime: exec: encode %s: %w", filepath.Base(path), err)
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// writeFileAtomic writes via a synced temporary file and a rename, so a
// reader (or a node after a crash) sees the old or the new content, never
// a torn one.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp-go"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("runtime: exec: write %s: %w", filepath.Base(path), err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("runtime: exec: write %s: %w", filepath.Base(path), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("runtime: exec: sync %s: %w", filepath.Base(path), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("runtime: exec: write %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("runtime: exec: write %s: %w", filepath.Base(path), err)
	}
	return nil
}
