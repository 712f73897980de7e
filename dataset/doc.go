// Package dataset owns datasets as UnixFS DAGs: importing a file or a
// directory with boxo's importer using kubo's CIDv1 defaults (raw leaves,
// sha2-256, 256 KiB fixed chunks, balanced layout of 174 links, dag-pb
// directories, hidden files left out), so the root CID equals what
// `ipfs add -r --cid-version 1` prints; the blockstore over the node's Badger
// (the store's dataset namespace); walking a DAG for its blocks; writing a
// DAG back out as files; checking that a DAG writes out as it claims (Check:
// sizes its blocks hold, plain entry names, bounded entries) before a CAR is
// imported or a DAG written out; CAR export and import (go-car); and the exchange
// that fetches missing blocks from the org's machines, verifying each against
// its CID: a bulk stream protocol of cshare's (BlocksProtocol), with boxo's
// bitswap on the same host for what that does not bring, and a protocol that
// asks a machine whether it holds a whole dataset (HaveProtocol).
package dataset
