#!/bin/sh
# A guard process (dlock's other child) held stopped while CMD runs (SIGSTOP sent to its pid,
# a debugger) must not keep dlock, and the lock, after CMD has ended: dlock tells the guard
# it is done and waited for it to exit, for ever, while it still held the lock (and kept
# renewing it).
# With --traced, the guard is held in a tracer's stop (ptrace), which SIGCONT does not end,
# for 10 s: dlock kills it a second after CMD's end, and must not then wait to reap it
# either (the tracer, not dlock, is told of its death first).
# Usage: stopped_guard_does_not_keep_the_lock.sh DLOCK_BINARY [--traced] (ps, python3 on PATH)
set -u
. "$(dirname "$0")/wait_gone.sh"
dlock=$1
traced=${2:-}
dir=$(mktemp -d)
apid=
guard=
tracer=
cleanup() {
  [ -n "$tracer" ] && kill -9 "$tracer" 2>/dev/null
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
if [ "$traced" = --traced ]; then
  find_guard "$apid"
  # PTRACE_SEIZE then PTRACE_INTERRUPT: a tracer's stop; held 10 s, then the tracer exits.
  python3 -c '
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
for request in (0x4206, 0x4207):  # PTRACE_SEIZE, PTRACE_INTERRUPT
    if libc.ptrace(request, pid, None, None) != 0:
        sys.exit("ptrace %#x: %s" % (request, os.strerror(ctypes.get_errno())))
os.waitpid(pid, 0x40000000)  # __WALL: until it is in the stop
open(sys.argv[2], "w").close()
time.sleep(10)' "$guard" "$dir/traced" 2> "$dir/tracer-err" &
  tracer=$!
  while [ ! -e "$dir/traced" ]; do
    running "$tracer" || { echo "the tracer failed: $(cat "$dir/tracer-err")" >&2; exit 1; }
    sleep 0.01
  done
  wait_gone "$apid" 5 "dlock still runs 5 s after its CMD (0.5 s) began, its guard held by a tracer"
else
  stop_guard "$apid"
  wait_gone "$apid" 10 "dlock still runs 10 s after its CMD (0.5 s) began, its guard stopped"
fi
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
