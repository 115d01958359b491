#!/usr/bin/env bash
# Runs every native fuzz target of the module for FUZZTIME each (default 10s)
# and fails only when a target finds a real failure.
# Usage: scripts/fuzz.sh [package pattern...]   (default ./...)
#
# Why the retry: with a duration -fuzztime, Go's fuzzing coordinator
# (internal/fuzz.CoordinateFuzzing) turns the deadline into a context and is
# meant to treat its expiry as normal termination, but it compares the parent
# context's error with the child's, and context cancellation closes the
# parent before it cancels the child. A coordinator woken in that window
# reports "context deadline exceeded" as a failure although nothing crashed
# (no input written, nothing reproducible), more often on a loaded machine
# and with short budgets such as FUZZTIME=2s. A real failure always writes its
# input to testdata/fuzz/<target>/ and says "Failing input written to"; so a
# run that fails with that deadline message, says no such thing and left no
# new file in the target's corpus is run again (at most $retries times), and
# every other failure fails at once. A count budget (FUZZTIME=10000x) has no
# deadline at all and never needs the retry.
set -euo pipefail
fuzztime="${FUZZTIME:-10s}"
retries=3
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# corpus lists the files in a target's corpus directory, one a line.
corpus() { find "$1" -type f 2>/dev/null | sort || true; }

status=0
while read -r pkg dir; do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for target in $targets; do
    attempt=1
    while :; do
      again=""
      [ "$attempt" -eq 1 ] || again=", retry $((attempt - 1))"
      echo "fuzz $pkg $target ($fuzztime$again)"
      before=$(corpus "$dir/testdata/fuzz/$target")
      if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >"$log" 2>&1; then
        break
      fi
      after=$(corpus "$dir/testdata/fuzz/$target")
      if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written to' "$log" &&
        [ "$before" = "$after" ] && [ "$attempt" -le "$retries" ]; then
        echo "  coordinator deadline race, no failing input: running $target again (see scripts/fuzz.sh)"
        attempt=$((attempt + 1))
        continue
      fi
      cat "$log"
      status=1
      break
    done
  done
done < <(go list -f '{{.ImportPath}} {{.Dir}}' "${pkgs[@]}")
exit $status
