#!/bin/sh
# A lock whose --lease runs out may be granted to the next holder at the lease's end: CMD,
# which ignores SIGTERM, must be dead a margin before that (the core's loss margin, 50 ms for
# a 1 s lease), not at the same instant, which leaves only the next holder's start-up between
# them. On file:// a fencing token is the wall clock in µs at the grant (backends/file/
# README.md, "Fencing"), and the lease counts from after it: the lease ends 1 s after CMD's
# token at the earliest. That is compared with the last wall-clock stamp CMD wrote (one every
# 2 ms), and so is the grant of the next holder, queued meanwhile.
# With --guard-stopped, CMD's guard (dlock's other child) is held stopped from CMD's start
# until dlock has ended CMD, and no next holder queues: dlock must kill CMD by itself, in
# time, while the guard does not answer (it is killing the tree at the same deadline, or slow).
# dlock waited up to 200 ms for its answer, and CMD ran 152 ms past the lease's end.
# With --max-hold-guard-stopped, the same, and dlock also stops CMD at --max-hold 900ms, 100 ms
# before the lease's end: the guard is asked to follow that stop and does not answer. dlock
# waited 200 ms for it, past the kill deadline, and CMD ran about 100 ms past the lease's end.
# Usage: lease_end_kills_before_regrant.sh DLOCK_BINARY [--guard-stopped|--max-hold-guard-stopped]
# (bash, ps on PATH)
set -u
. "$(dirname "$0")/wait_gone.sh"
dlock=$1
mode=${2:-}
case $mode in
  '') guard_stopped= max_hold= ;;
  --guard-stopped) guard_stopped=1 max_hold= ;;
  --max-hold-guard-stopped) guard_stopped=1 max_hold='--max-hold 900ms' ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
dir=$(mktemp -d)
apid=
bpid=
guard=
cleanup() {
  [ -n "$guard" ] && kill -CONT "$guard" 2>/dev/null
  for p in $apid $bpid $guard; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
uri="file://$dir/locks"
mkfifo "$dir/never"  # read -t on it: a 2 ms sleep without a fork
# CMD starts stamping once its guard is up.
# shellcheck disable=SC2086  # $max_hold: none or two words
"$dlock" run --uri "$uri" --lease 1s $max_hold --grace 5s job -- env LC_ALL=C bash -c "
  trap '' TERM
  exec 3<> '$dir/never'
  until ps --ppid \$PPID -o args= | grep -q __guard; do read -t 0.002 -u 3; done
  echo \$DLOCK_FENCING_TOKEN > '$dir/first-token'
  while :; do echo \${EPOCHREALTIME/[.,]/} >> '$dir/stamps'; read -t 0.002 -u 3; done" 2> "$dir/err" &
apid=$!
wait_started "$dir/stamps" "$dir/err" 0.01
first_token=$(cat "$dir/first-token")
if [ -n "$guard_stopped" ]; then
  stop_guard "$apid"
  # Held stopped until 300 ms past the lease's end (dlock continues it once CMD is gone).
  until [ $(($(date +%s%N) / 1000)) -gt $((first_token + 1300000)) ]; do sleep 0.02; done
  kill -CONT "$guard"
else
  # Queued behind it: takes the lock as soon as it is free.
  "$dlock" run --uri "$uri" --wait 10s job -- sh -c "echo \$DLOCK_FENCING_TOKEN > '$dir/token'" &
  bpid=$!
fi
wait "$apid"; astatus=$?; apid=
cat "$dir/err"
[ "$astatus" -eq 70 ] || { echo "the first dlock exited $astatus, want 70 (lock lost)" >&2; exit 1; }
last=$(tail -n 1 "$dir/stamps")
now=$(($(date +%s%N) / 1000))
tokens=$first_token
if [ -n "$bpid" ]; then
  wait "$bpid"; bstatus=$?; bpid=
  [ "$bstatus" -eq 0 ] || { echo "the waiting dlock exited $bstatus, want 0" >&2; exit 1; }
  tokens="$tokens $(cat "$dir/token")"
fi
for t in $tokens; do
  if [ $((now - t)) -lt 0 ] || [ $((now - t)) -gt 60000000 ]; then
    echo "token $t is no wall-clock time in µs (now $now): this test's premise is gone" >&2
    exit 1
  fi
done
before_end=$(( (first_token + 1000000 - last) / 1000 ))
echo "the old CMD's last stamp came ${before_end} ms before its lease's end (negative: after it)"
# Half the margin: room for a late wake-up of dlock and the 2 ms between stamps.
if [ "$before_end" -lt 25 ]; then
  echo "CMD must be dead at least 25 ms (half the 50 ms loss margin) before the lease's end" >&2
  exit 1
fi
[ -z "$guard" ] || exit 0
before_next=$(( ($(cat "$dir/token") - last) / 1000 ))
echo "the next holder's grant came ${before_next} ms after the old CMD's last stamp"
if [ "$before_next" -lt 0 ]; then
  echo "CMD ran on after the next holder got the lock" >&2
  exit 1
fi
