#!/bin/sh
# A stopped `dlock run` (SIGSTOP, a frozen cgroup, a debugger) renews nothing: its lease runs
# out and the lock goes to someone else. Its command must not run on past that moment: the
# guard process, which dlock keeps told of the lease's end, kills the group by then.
# Usage: stopped_dlock_leaves_no_command.sh DLOCK_BINARY (DLOCK_TEST_REDIS_URI set)
set -u
. "$(dirname "$0")/wait_gone.sh"
dlock=$1
uri=${DLOCK_TEST_REDIS_URI:-}
[ -n "$uri" ] || { echo "DLOCK_TEST_REDIS_URI is not set (scripts/servers.sh env)" >&2; exit 1; }
dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && { kill -CONT "$pid"; kill -9 "$pid"; } 2>/dev/null
  [ -s "$dir/cmd.pid" ] && kill -9 "$(cat "$dir/cmd.pid")" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
# A 1 s lease, renewed every third of it while dlock runs. restart_grace=0: the server may
# just have been restarted by a fault test, and this test is not about that pause.
"$dlock" run --uri "$uri?lease=1s&restart_grace=0" stopped-dlock-$$ -- \
  sh -c "echo \$\$ > $dir/cmd.pid; while :; do sleep 0.05; done" 2> "$dir/err" &
pid=$!
wait_started "$dir/cmd.pid" "$dir/err" 0.05
cmd=$(cat "$dir/cmd.pid")
kill -STOP "$pid"
# (A killed CMD stays a zombie until dlock, its parent, is continued and reaps it.)
wait_gone "$cmd" 6 "CMD still running 6 s after dlock was stopped, with a 1 s lease long gone"
# The lease has at most 1 s left when dlock stops; 2.5 s leaves room for a slow machine.
if [ "$ms" -gt 2500 ]; then
  echo "CMD ran on ${ms} ms after dlock stopped, past its 1 s lease" >&2
  exit 1
fi
kill -CONT "$pid"
wait "$pid"
echo "CMD was killed ${ms} ms after dlock stopped (lease 1s)"
