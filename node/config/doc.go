// Package config owns node.yaml, the file an operator gives to
// `cshare node run --config node.yaml`: how the file is parsed, which keys it
// has, their defaults, and how they are checked against this machine's
// hardware (runtime/hw) before the node starts. It does not read flags or the
// data dir, and it does not own org-wide settings, which live in the ledger.
//
// The format is the resources and GPU keys of docs/design.md §3.9 plus
// a few node keys:
//
//	name: office-gpu-1        # optional; empty means the node picks (hostname)
//	heartbeat_interval: 30s   # optional Go duration, 1s..1h, default 30s
//	resources:
//	  cpu_limit: 80           # percent of this machine's CPUs, 1..100, default 100 ("80%" also accepted)
//	  memory_limit: 16384     # MB, 0 < value <= machine RAM, default all of it
//	  disk_limit: 102400      # MB, 0 < value <= data-dir filesystem size, default all of it
//	  max_concurrent_jobs: 4  # job slots, 0..1024, default the CPU count; 0 = this machine takes no job instances
//	  gpus:                   # default: every detected GPU with all its memory; [] = offer no GPUs
//	    - device: 0           # NVML index; must be present; each device at most once
//	      memory: 8192        # MB usable on that GPU, 0 < value <= the GPU's memory, default all of it
//	runtime:
//	  exec: false             # the exec driver (plain, unsandboxed processes) runs only when true
//	  docker: true            # default true
//	discovery:
//	  mdns: true              # find the org's machines on the local network with mDNS, default true
//	relay:
//	  serve: true             # serve as a relay for the org's machines behind NATs; default: when this
//	                          # machine finds itself reachable from outside; false = never
//	nat:
//	  portmap: true           # ask the router for a port mapping (UPnP, NAT-PMP), default true
//	ssh:
//	  listen: ":2222"         # the SSH gateway into this machine's containers; off unless set
//	jupyter:
//	  listen: ":8443"         # the HTTPS proxy into this machine's jupyter-mode contracts; off unless set
//	disk:
//	  reserve: 32             # MB kept free on the data dir's filesystem, and as much again in a ballast file
//	                          # given back when the disk fills; default 32 (at most an eighth of the disk),
//	                          # 0..a quarter of the disk; 0 = no reserve (a full disk then kills the node)
//
// Sizes (memory_limit, disk_limit, gpus[].memory, disk.reserve) are MB ("MB" means MiB
// throughout cshare) given as a number, or a string with a unit like "16GB",
// "512MiB" or "1.5T"; units are binary, like Docker's: 16GB is 16384 MB.
// A null value (a key with nothing after it) is the same as an absent key.
//
// Parsing is strict: unknown keys, keys given twice, values of the wrong type
// and more than one YAML document are errors. Every error is one line that
// names the full key (resources.gpus[1].memory) and what is allowed, followed
// by where it is ("(node.yaml:7)" from Load, "(line 7)" from Parse); the
// returned error is an *Error. Parse checks what does not depend on the
// machine (ranges of cpu_limit, heartbeat_interval, max_concurrent_jobs, the
// name, duplicate GPU devices); File.Limits checks the rest against the
// hardware and fills in the defaults. The node refuses to start on any error.
package config
