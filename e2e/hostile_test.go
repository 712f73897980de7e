//go:build e2e

package e2e

import "testing"

func init() { fullHostile = true }

// TestHostile runs every hostile case (hostile_cases_test.go) against one
// org of three persons on three nodes: for each, the refusal in one line
// or one JSON error naming the field, no raw control byte, no person's
// data in another member's output, every node alive and one state hash on
// every node afterwards.
func TestHostile(t *testing.T) {
	runHostile(t, func(hcase) bool { return true })
}
