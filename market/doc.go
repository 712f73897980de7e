// Package market will own rental offers, the offer query language and
// contract allocation and expiry (seed 002, DESIGN §8), as a pure core like
// smartshare. It is reserved: no issue has asked for it yet, and nothing in
// cshare uses it.
package market
