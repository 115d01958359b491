#!/usr/bin/env bash
# test-fdb.sh: run the FoundationDB engine's tests against a throwaway
# FoundationDB.
#
# Starts one fdbserver on a free loopback port with a fresh data directory
# and cluster file, configures it as a single in-memory database, waits
# until it is available, then runs the tests of the FoundationDB engine's
# module, `go -C fdblayer/fdbengine test ./...` (the store's conformance
# suite on the cluster, the engine's own tests, the tuple layer against the
# binding's), with FDB_CLUSTER_FILE pointing at it. The server and its
# directory are removed whatever happens; the exit status is go test's.
#
# Needs the FoundationDB server and client packages (fdbserver, fdbcli and
# libfdb_c). Extra arguments go to go test, e.g. scripts/test-fdb.sh -run Conformance.
set -euo pipefail

if ! command -v fdbserver >/dev/null 2>&1 || ! command -v fdbcli >/dev/null 2>&1; then
	echo "test-fdb: FoundationDB server/client packages are not installed (fdbserver and fdbcli must be on PATH)" >&2
	exit 1
fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/mkitfdb-fdb.XXXXXX")
server_pid=""

cleanup() {
	if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port: one nothing on loopback answers on (bounded tries).
port=""
for _ in $(seq 1 50); do
	candidate=$((20000 + RANDOM % 40000))
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then
		port=$candidate
		break
	fi
done
if [[ -z "$port" ]]; then
	echo "test-fdb: no free loopback port found" >&2
	exit 1
fi

cluster="$work/fdb.cluster"
mkdir -p "$work/data" "$work/logs"
echo "mkitfdb:test$RANDOM$RANDOM@127.0.0.1:$port" >"$cluster"

fdbserver -p "127.0.0.1:$port" -C "$cluster" -d "$work/data" -L "$work/logs" \
	>"$work/fdbserver.out" 2>&1 &
server_pid=$!

# configure new fails until the server is up; retry within a deadline. A
# try that timed out after configuring leaves "already exists" behind.
configured() {
	fdbcli -C "$cluster" --timeout 5 --exec "configure new single memory" >"$work/configure.out" 2>&1 ||
		grep -q "already exists" "$work/configure.out"
}
deadline=$((SECONDS + 60))
until configured; do
	if ! kill -0 "$server_pid" 2>/dev/null; then
		echo "test-fdb: fdbserver exited:" >&2
		cat "$work/fdbserver.out" >&2
		exit 1
	fi
	if ((SECONDS >= deadline)); then
		echo "test-fdb: could not configure the database within 60s:" >&2
		cat "$work/configure.out" >&2
		exit 1
	fi
	sleep 1
done

until fdbcli -C "$cluster" --timeout 5 --exec "status minimal" 2>/dev/null | grep -q "The database is available"; do
	if ((SECONDS >= deadline)); then
		echo "test-fdb: the database did not become available within 60s" >&2
		fdbcli -C "$cluster" --timeout 5 --exec "status" >&2 || true
		exit 1
	fi
	sleep 1
done

cd "$repo"
status=0
FDB_CLUSTER_FILE="$cluster" go -C fdblayer/fdbengine test -count=1 "$@" ./... || status=$?
exit "$status"
