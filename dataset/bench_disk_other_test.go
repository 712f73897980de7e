//go:build !linux

package dataset

import (
	"testing"
	"time"
)

// diskWriteTime is measured on Linux only (O_DIRECT); 0 leaves the metric out.
func diskWriteTime(*testing.B, []byte) time.Duration { return 0 }
