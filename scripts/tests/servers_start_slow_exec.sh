#!/usr/bin/env bash
# servers.sh records a server's pid from the shell that then execs the server: until the exec
# the pid is a bash's. A start that looked at the program's name in that moment took the
# server for dead ("exited during startup") on a loaded machine, and its caller (CI's
# compare step) failed while the server came up fine. The test widens the moment.
#
# Usage: servers_start_slow_exec.sh PORT   (ZooKeeper: servers.sh spawns its JVM itself)
set -euo pipefail
port=$1
here=$(cd "$(dirname "$0")" && pwd)
servers="$here/../servers.sh"
dir=$(mktemp -d /tmp/dlock-slow-exec-test.XXXXXX)
chmod 755 "$dir"
export DLOCK_SERVERS_DIR=$dir DLOCK_ZOOKEEPER_PORT=$port
cleanup() { "$servers" stop zookeeper >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT

DLOCK_SERVERS_TEST_SPAWN_DELAY=0.5 "$servers" start zookeeper ||
  { echo "FAIL: a server whose exec came 0.5 s after its pid was recorded was taken for dead" >&2; exit 1; }
"$servers" status zookeeper
echo "PASS: the start waited for the exec"
