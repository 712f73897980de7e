//go:build !race

package api

// raceOn: see race_test.go.
const raceOn = false
