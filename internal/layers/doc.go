// Package layers holds no code: its test checks that the module's top-level
// folders (ledger, p2p, node, internal, ...) form layers that point one way,
// that is, that no two of them import each other, by their code or their
// tests, both ways round.
package layers
