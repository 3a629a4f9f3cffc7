#!/bin/sh
# At a lease's end dlock must kill CMD a margin early by itself, whatever its guard does: the
# guard, told the same deadline, is busy killing the tree then (or stopped, or slow) and does
# not answer dlock's "a stop begins" at once. dlock waited up to 200 ms for that answer before
# its first signal, so under load (CI, ASan) CMD ran on to 11 ms before the lease's end, and
# with the guard stopped past the end. Held stopped here: CMD, which ignores SIGTERM, must
# still be dead half the loss margin (25 ms of 50) before the end of its 1 s lease on file://,
# where the fencing token is the wall clock in µs at the grant (backends/file/README.md,
# "Fencing") and the lease counts from after it.
# Usage: lease_end_kills_with_the_guard_stopped.sh DLOCK_BINARY (bash and ps on PATH)
set -u
. "$(dirname "$0")/wait_gone.sh"
dlock=$1
dir=$(mktemp -d)
dpid=
guard=
cleanup() {
  [ -n "$guard" ] && kill -CONT "$guard" 2>/dev/null
  for p in $dpid $guard; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
uri="file://$dir/locks"
mkfifo "$dir/never"  # read -t on it: a 2 ms sleep without a fork
# CMD starts stamping once its guard (dlock's other child) is up.
"$dlock" run --uri "$uri" --lease 1s --grace 5s job -- env LC_ALL=C bash -c "
  trap '' TERM
  exec 3<> '$dir/never'
  until ps --ppid \$PPID -o args= | grep -q __guard; do read -t 0.002 -u 3; done
  echo \$DLOCK_FENCING_TOKEN > '$dir/token'
  while :; do echo \${EPOCHREALTIME/[.,]/} >> '$dir/stamps'; read -t 0.002 -u 3; done" 2> "$dir/err" &
dpid=$!
wait_started "$dir/stamps" "$dir/err" 0.01
guard=$(ps --ppid "$dpid" -o pid=,args= | awk '$3 == "__guard" { print $1 }')
[ -n "$guard" ] || { echo "no guard process under dlock $dpid" >&2; exit 1; }
kill -STOP "$guard"
# dlock waits for its guard to end before it exits: the guard is continued 300 ms after the
# lease's end, when CMD has had to be dead for 350 ms.
token=$(cat "$dir/token")
until [ $(($(date +%s%N) / 1000)) -gt $((token + 1300000)) ]; do sleep 0.02; done
kill -CONT "$guard"
wait "$dpid"; status=$?; dpid=
cat "$dir/err"
[ "$status" -eq 70 ] || { echo "dlock exited $status, want 70 (lock lost)" >&2; exit 1; }
last=$(tail -n 1 "$dir/stamps")
now=$(($(date +%s%N) / 1000))
if [ $((now - token)) -lt 0 ] || [ $((now - token)) -gt 60000000 ]; then
  echo "token $token is no wall-clock time in µs (now $now): this test's premise is gone" >&2
  exit 1
fi
before_end=$(( (token + 1000000 - last) / 1000 ))
echo "with the guard stopped, CMD's last stamp came ${before_end} ms before its lease's end (negative: after it)"
if [ "$before_end" -lt 25 ]; then
  echo "CMD must be dead at least 25 ms (half the 50 ms loss margin) before the lease's end" >&2
  exit 1
fi
