// Package cli is the cshare command line: cobra commands that parse flags,
// make one or two calls through the node API's typed client
// (github.com/cshare/cshare/node/api) and print the answer. It holds no
// business logic; the node decides, the CLI asks and shows. Main is the whole
// entry point, so tests run the CLI in-process against an httptest node.
//
// # Contracts scripts and tests rely on
//
//   - The node is found through the data dir: --data-dir, else
//     $CSHARE_DATA_DIR, else ~/.cshare. It holds api.addr and api.token;
//     --api HOST:PORT replaces api.addr (for `node run` it is the address to
//     listen on, default 127.0.0.1:7480).
//   - Every listing and show takes --json and then prints exactly one JSON
//     value (indented) on stdout; lists print [] rather than null. Full IDs
//     are always in the JSON.
//   - `org create`, `org key`, `org invite` and `job submit` print the org
//     key, invite code or job ID alone as the last line of stdout, so
//     `cshare job submit ... | tail -n1` is the job ID.
//   - `user init` and `user import` print the person's ID alone as the last
//     line of stdout. The `user` commands read and write the data dir's
//     user.key themselves: no node needs to run.
//   - Errors are one line on stderr, "cshare: <what is wrong and what to do>".
//     Runtime errors exit 1. Usage errors (unknown command or flag, a bad flag
//     value, a wrong number of arguments) exit 2 and end with
//     "(see cshare <command> --help)". `smartshare plan` exits 2 on bad input.
//   - With no node answering, the message is "no node running for data dir
//     D; start one with: cshare node run --data-dir D".
//
// # Choices where the brief was silent
//
//   - Human tables show IDs shortened to their last 12 characters (peer IDs
//     and CIDs share their first characters, so the end is what tells them
//     apart). Commands that take an ID accept a full ID, a machine/job/member
//     name, or a unique prefix or suffix of the ID: the CLI sends the argument
//     as given and, if the node answers 400 or 404, resolves it against the
//     matching listing and retries once with the full ID. An argument that
//     matches several is an error that lists them.
//   - Tables are aligned by display width rather than with text/tabwriter,
//     because the status marks (🟢 🟡 ⚫) are one rune but two terminal
//     columns wide, which tabwriter cannot know.
//   - `job submit` sends priority 9999 (the lowest) and cpus 1 unless told
//     otherwise, and rejects --cpus below 1: the API reads 0 as "default".
//     Its command comes after `--`; plain arguments without `--` are accepted
//     too, as long as none of them looks like a flag.
//   - `node run` passes zero for the flags that were not given, so the node
//     applies node.yaml first and then its own defaults (the help shows them).
//   - `org invite --expires` takes a Go duration, a number of days ("7d"), or
//     "0"/"never" for no expiry.
//   - `job logs ID` without --item works when the job has a single item.
//   - A --passphrase-file that cannot be read, is empty or is over 4 KiB is
//     a bad flag value: exit 2. `user import` of the person the data dir
//     already has needs no --force and takes the file's name.
//   - `org create`, `node join` and `member join` send user_name even when
//     the data dir has a person key (the node then ignores it): the CLI does
//     not read user.key for them, so a running node stays the one that
//     decides.
package cli
