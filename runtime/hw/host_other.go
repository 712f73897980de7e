//go:build !linux

package hw

import (
	"fmt"
	"runtime"
)

var errUnsupported = fmt.Errorf("not implemented on %s; cshare nodes run on linux", runtime.GOOS)

func memTotalMB(string) (int64, error)      { return 0, errUnsupported }
func diskTotalMB(string) (int64, error)     { return 0, errUnsupported }
func cgroupCPUs(string, string) (int, bool) { return 0, false }
