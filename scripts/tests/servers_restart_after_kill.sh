#!/usr/bin/env bash
# servers.sh must start a server whose previous instance was killed with SIGKILL (a CI machine
# reused after a crash): the dead server's pid and lock files are left behind and must neither
# be taken for the new server nor block it. Uses its own directory and port.
#
# Usage: servers_restart_after_kill.sh NAME PORT_VAR PORT
set -euo pipefail
name=$1 port_var=$2 port=$3
here=$(cd "$(dirname "$0")" && pwd)
servers="$here/../servers.sh"
dir=$(mktemp -d /tmp/dlock-restart-test.XXXXXX)
chmod 755 "$dir"
export DLOCK_SERVERS_DIR=$dir "$port_var=$port"
cleanup() { "$servers" stop "$name" >/dev/null 2>&1 || true; rm -rf "$dir"; }
trap cleanup EXIT

"$servers" start "$name"
pid=$(cat "$dir/$name/pid")
kill -9 "$pid"
# Kill the rest of the process tree too, as a reboot or an OOM kill of the group would, and
# start again at once: the killed server may still be an unreaped zombie (PID 1 reaps it
# when it gets to it), which kill(pid, 0) and so the server's own lock-file checks see alive.
pkill -9 -f -- "$dir/$name" || true

"$servers" start "$name"
"$servers" status "$name"
new_pid=$(cat "$dir/$name/pid")
[[ "$new_pid" != "$pid" ]] || { echo "FAIL: servers.sh recorded the killed server's pid $pid" >&2; exit 1; }
echo "PASS: $name restarted after SIGKILL (old pid $pid, new pid $new_pid)"
