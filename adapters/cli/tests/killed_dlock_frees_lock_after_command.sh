#!/bin/sh
# A dlock killed with SIGKILL leaves CMD to its guard. On file:// the kernel would free the
# lock with dlock's descriptors, before the guard has even run: the guard keeps a copy of them
# and frees the lock only once CMD's group is gone. The guard is held stopped here, so the
# order does not depend on who runs first: while CMD still runs, the lock must be busy.
# Usage: killed_dlock_frees_lock_after_command.sh DLOCK_BINARY (ps on PATH)
set -u
. "$(dirname "$0")/wait_gone.sh"
dlock=$1
dir=$(mktemp -d)
dpid=
guard=
cmd=
cleanup() {
  [ -n "$guard" ] && kill -CONT "$guard" 2>/dev/null
  for p in $dpid $cmd $guard; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
uri="file://$dir/locks"
# CMD says it runs once its guard (dlock's other child) is up; it ignores SIGTERM.
"$dlock" run --uri "$uri" --lease 10s job -- sh -c "
  trap '' TERM
  until ps --ppid \$PPID -o args= | grep -q __guard; do sleep 0.01; done
  echo \$\$ > '$dir/tmp.pid'; mv '$dir/tmp.pid' '$dir/cmd.pid'
  while :; do sleep 0.05; done" 2> "$dir/err" &
dpid=$!
wait_started "$dir/cmd.pid" "$dir/err" 0.05
cmd=$(cat "$dir/cmd.pid")
stop_guard "$dpid"
kill -9 "$dpid"
wait "$dpid"
dpid=
running "$cmd" || { echo "CMD died with dlock: nothing to test" >&2; exit 1; }
"$dlock" run --uri "$uri" --wait 0 job -- true 2> /dev/null
rc=$?
kill -CONT "$guard"
if [ "$rc" -ne 75 ]; then
  echo "a next dlock run --wait 0 exited $rc while the killed dlock's CMD still ran, want 75 (busy)" >&2
  exit 1
fi
wait_gone "$cmd" 3 "CMD still running 3 s after its guard was continued"
# Once CMD is gone the guard lets go: the next holder gets the lock.
"$dlock" run --uri "$uri" --wait 3s job -- sh -c "case \$(ps -o stat= -p $cmd) in '' | Z*) ;; *) exit 9 ;; esac"
rc=$?
[ "$rc" -eq 0 ] || { echo "the next dlock run exited $rc, want 0 (9: the old CMD ran beside it)" >&2; exit 1; }
echo "the lock stayed held until the guard had stopped CMD (${ms} ms after it was continued)"
