package diskguard

import "os"

// fill makes path a file of size bytes whose blocks are all allocated
// (see allocate).
func fill(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = allocate(f, size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeZeros writes zeros over f from its start up to size bytes.
func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, min(size, MiB))
	for off := int64(0); off < size; {
		n, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off)
		if err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}
