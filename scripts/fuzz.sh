#!/usr/bin/env bash
# Runs every native fuzz target of the module for FUZZTIME each (default 10s).
# Usage: scripts/fuzz.sh [package pattern...]   (default ./...)
set -euo pipefail
fuzztime="${FUZZTIME:-10s}"
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
status=0
for pkg in $(go list "${pkgs[@]}"); do
  targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
  for target in $targets; do
    echo "fuzz $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/fuzz.$$.log 2>&1; then
      cat /tmp/fuzz.$$.log
      status=1
    fi
  done
done
rm -f /tmp/fuzz.$$.log
exit $status
