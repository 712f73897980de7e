//go:build cshare_stubs

package cli

import (
	"context"
	"errors"
	"io"
)

// Stand-ins while node and smartshare do not compile; build with
// -tags cshare_stubs. TEMPORARY.
var (
	runNode = func(ctx context.Context, o runOptions) error {
		return errors.New("built without the node (cshare_stubs)")
	}
	runPlan = func(inputPath string, asJSON bool, stdout io.Writer) error {
		return errors.New("built without smartshare (cshare_stubs)")
	}
	agentVersion = "0.0.0-stub"
)

// stubbed says whether node and smartshare are stand-ins (tests skip).
const stubbed = true
