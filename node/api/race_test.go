//go:build race

package api

// raceOn says the tests run with the race detector, which makes reading
// 64 MiB of JSON take 20 s.
const raceOn = true
