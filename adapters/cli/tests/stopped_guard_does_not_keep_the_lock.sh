#!/bin/sh
# A guard process (dlock's other child) held stopped while CMD runs (SIGSTOP sent to its pid,
# a debugger) must not keep dlock, and the lock, after CMD has ended: dlock tells the guard
# it is done and waited for it to exit, for ever, while it still held the lock (and kept
# renewing it).
# Usage: stopped_guard_does_not_keep_the_lock.sh DLOCK_BINARY (ps on PATH)
set -u
. "$(dirname "$0")/wait_gone.sh"
dlock=$1
dir=$(mktemp -d)
apid=
guard=
cleanup() {
  [ -n "$guard" ] && kill -CONT "$guard" 2>/dev/null
  [ -n "$apid" ] && kill -9 "$apid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
uri="file://$dir/locks"
# CMD says it runs once its guard is up, then ends 0.5 s later.
"$dlock" run --uri "$uri" job -- sh -c "
  until ps --ppid \$PPID -o args= | grep -q __guard; do sleep 0.01; done
  echo started > '$dir/started'
  sleep 0.5" 2> "$dir/err" &
apid=$!
wait_started "$dir/started" "$dir/err" 0.01
stop_guard "$apid"
wait_gone "$apid" 10 "dlock still runs 10 s after its CMD (0.5 s) began, its guard stopped"
wait "$apid"; astatus=$?; apid=
cat "$dir/err"
[ "$astatus" -eq 0 ] || { echo "dlock exited $astatus, want 0 (CMD's status)" >&2; exit 1; }
echo "dlock exited ${ms} ms after its guard was stopped (CMD ran 0.5 s)"
if running "$guard"; then
  echo "the guard (pid $guard) outlived dlock" >&2
  exit 1
fi
guard=
"$dlock" run --uri "$uri" --wait 0 job -- true || { echo "the lock was not free after dlock exited" >&2; exit 1; }
