// Package dataset owns datasets as UnixFS DAGs: importing a file or a
// directory with boxo's importer using kubo's CIDv1 defaults (raw leaves,
// sha2-256, 256 KiB fixed chunks, balanced layout of 174 links, dag-pb
// directories, hidden files left out), so the root CID equals what
// `ipfs add -r --cid-version 1` prints; the blockstore over the node's Badger
// (the store's dataset namespace); walking a DAG for its blocks; writing a
// DAG back out as files; and the bitswap exchange that fetches missing blocks
// from the org's machines, verifying each against its CID.
package dataset
