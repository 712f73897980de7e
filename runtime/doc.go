// Package runtime owns running instances on this machine: the drivers that turn
// a [Spec] into a running container or process, wait for it, stop it, read its
// logs and find it again after the node restarts.
//
// The unit a driver runs is one run: one agenda item executed by one instance.
// An instance is a long-lived worker identity that executes items one after
// another; each item is a separate run (a container or process that runs the
// job's command once with CSHARE_ITEM set and exits) labelled with the
// instance's ID. Every run carries the labels [LabelOrg], [LabelJob],
// [LabelInstance], [LabelItem] and [LabelMachine], and its command sees the
// environment variables CSHARE_JOB_ID, CSHARE_ITEM, CSHARE_INSTANCE and
// CSHARE_MACHINE.
//
// Three drivers implement [Driver]:
//
//   - [Docker] runs each run as a Docker container through a narrow
//     [DockerAPI] (the few SDK methods it calls). Limits map to the
//     container's HostConfig (see [HostConfig]): NanoCPUs, Memory (hard),
//     MemoryReservation (baseline), ShmSize, PidsLimit, GPUs as an "nvidia"
//     device request naming the exact UUIDs, and bind mounts that are
//     read-only when asked. Containers are never privileged, never on the host
//     network, run under an init process so SIGTERM reaches the command, and
//     are not auto-removed: the exit code and logs survive a node crash until
//     [Driver.Remove].
//   - [Exec] runs plain processes for machines without Docker. It is not a
//     sandbox; the node refuses it unless the machine owner enables it. Each
//     run is wrapped by /bin/sh, which records the command's exit code in a
//     file, so a node that was killed and restarted can still report exit
//     codes of the runs it started (see [Exec] for the on-disk layout). Limits
//     are enforced with a cgroup v2 child group where the cgroup tree is
//     writable, with cgroup v1 groups where the host has only v1, and
//     otherwise a single warning says they are not.
//   - [Fake] is in memory, for in-process mesh tests and benchmarks.
//
// Errors callers branch on are sentinels: [ErrNotFound], [ErrImageNotFound],
// [ErrInvalidSpec], [ErrRunning]. [Spec.Validate] returns one-line errors that
// name the field, the value and what is allowed.
//
// Tests that need Docker use the image [TestImage], built without a registry by
// scripts/testimage.sh.
package runtime
