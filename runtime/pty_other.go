//go:build !linux

package runtime

import (
	"errors"
	"os"
)

func openPTY() (master, tty *os.File, err error) {
	return nil, nil, errors.New("terminals for exec runs are built for Linux only")
}

func setWinsize(f *os.File, cols, rows uint16) error {
	return errors.New("terminals for exec runs are built for Linux only")
}
