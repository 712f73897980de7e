package store

import "syscall"

// directIO is O_DIRECT: pack writes go from the block's memory to the disk
// without a copy into (and throttling by) the page cache.
const directIO = syscall.O_DIRECT
