//go:build race

package node

// raceOn says the tests run with the race detector, under which encoding
// and decoding JSON is some 20 times slower.
const raceOn = true
