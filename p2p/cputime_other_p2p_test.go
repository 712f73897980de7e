//go:build !unix

package p2p

import "time"

func ptCPUTime() time.Duration { return 0 }
