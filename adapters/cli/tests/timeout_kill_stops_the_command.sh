#!/bin/sh
# `timeout -s KILL T dlock run … -- CMD`: at expiry timeout(1) SIGKILLs dlock and then its
# whole process group (so does `kill -9 -PGID`, a shell killing the job). CMD runs in a group
# of its own and survives that; the guard, which must then stop it, must not be in dlock's
# group. On file:// the lock is free the moment dlock dies: CMD must be gone at once.
# Usage: timeout_kill_stops_the_command.sh DLOCK_BINARY (timeout and ps on PATH)
set -u
. "$(dirname "$0")/wait_gone.sh"
dlock=$1
dir=$(mktemp -d)
tpid=
cleanup() {
  [ -n "$tpid" ] && kill -9 "$tpid" 2>/dev/null
  [ -s "$dir/cmd.pid" ] && kill -9 "$(cat "$dir/cmd.pid")" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
uri="file://$dir/locks"
# CMD says it runs only once its guard (dlock's other child) is up: a dlock killed before
# that is the documented window between CMD's start and the guard's, not this case. CMD
# ignores SIGTERM: only the guard's SIGKILL ends it.
timeout -s KILL 60 "$dlock" run --uri "$uri" job -- sh -c "
  trap '' TERM
  until ps --ppid \$PPID -o args= | grep -q __guard; do sleep 0.01; done
  echo \$\$ > '$dir/tmp.pid'; mv '$dir/tmp.pid' '$dir/cmd.pid'
  while :; do sleep 0.05; done" 2> "$dir/err" &
tpid=$!
wait_started "$dir/cmd.pid" "$dir/err" 0.05
cmd=$(cat "$dir/cmd.pid")
# SIGALRM is timeout's own expiry: it SIGKILLs dlock, then its process group (itself too).
kill -ALRM "$tpid"
wait "$tpid"
rc=$?
tpid=
[ "$rc" -eq 137 ] || { echo "timeout exited $rc, want 137 (SIGKILL)" >&2; exit 1; }
wait_gone "$cmd" 3 "CMD still running 3 s after timeout -s KILL killed dlock: the lock is free, CMD is not stopped"
# The lock is free again, and the next holder runs with nothing of the old CMD beside it.
"$dlock" run --uri "$uri" --wait 0 job -- sh -c "case \$(ps -o stat= -p $cmd) in '' | Z*) ;; *) exit 9 ;; esac"
rc=$?
[ "$rc" -eq 0 ] || { echo "the next dlock run --wait 0 exited $rc, want 0 (9: the old CMD ran beside it)" >&2; exit 1; }
echo "CMD gone ${ms} ms after timeout -s KILL killed dlock and its process group"
