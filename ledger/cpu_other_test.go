//go:build !unix

package ledger

import "time"

func cpuNow() time.Duration { return 0 }
