//go:build !race

package node

// raceOn: see race_test.go.
const raceOn = false
