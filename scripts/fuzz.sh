#!/usr/bin/env bash
# Runs every fuzz target of the module (every `func FuzzX(f *testing.F)` in a
# _test.go file, found anew each run) for FUZZTIME each (default 1m). Each
# target's corpus is its package's testdata/fuzz/FuzzX (Go's place: seeds
# committed there run in every `go test`; a crasher found here is written
# there too and must be committed with its fix). Prints one line per target
# with its executions, then exits non-zero if any target failed.
# FUZZMINIMIZETIME (default 100x: 100 runs) bounds the minimisation of each
# new input (and crasher):
# at Go's default (60s) a target that keeps finding new coverage spends its
# whole FUZZTIME minimising.
#   FUZZTIME=20s scripts/fuzz.sh            # every target
#   FUZZTIME=20s scripts/fuzz.sh ./ledger    # the targets under ./ledger
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-1m}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-100x}
roots=("${@:-.}")
summary=()
failed=0
flaked=0
log=
trap 'rm -f "$log"' EXIT
while IFS=: read -r file name; do
  pkg=./$(dirname "${file#./}")
  log=$(mktemp)
  echo "== $pkg $name ($FUZZTIME)"
  corpus="$pkg/testdata/fuzz/$name"
  before=$(ls "$corpus" 2>/dev/null | wc -l)
  # -timeout 0: go test's own 10m would end a long FUZZTIME; the fuzzer
  # finds hung inputs itself.
  if $GO test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" -timeout 0 "$pkg" >"$log" 2>&1; then
    status=ok
  elif [ "$(ls "$corpus" 2>/dev/null | wc -l)" = "$before" ] && grep -q '^    context deadline exceeded$' "$log"; then
    # Go's coordinator can report its own -fuzztime deadline as a failure,
    # with no input written (golang/go#75804, fixed in Go 1.27).
    status=ok~
    flaked=$((flaked + 1))
  else
    status=FAIL
    failed=1
    tail -n 30 "$log"
  fi
  # The last progress line: "fuzz: elapsed: 20s, execs: 123456 (6172/sec), new interesting: 3 (total: 40)".
  execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*')
  summary+=("$(printf '%-5s %-28s %-34s execs=%s' "$status" "$pkg" "$name" "${execs:-?}")")
  rm -f "$log"
done < <(grep -rHo --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*' "${roots[@]}" | sed 's/func //' | sort)
echo
echo "fuzz summary (FUZZTIME=$FUZZTIME):"
printf '%s\n' "${summary[@]}"
if [ "$flaked" -gt 0 ]; then
  echo "ok~: $flaked target(s) ended with Go's spurious 'context deadline exceeded' (golang/go#75804) and no failing input"
fi
exit $failed
