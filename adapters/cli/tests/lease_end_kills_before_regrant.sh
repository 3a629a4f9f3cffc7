#!/bin/sh
# A lock whose --lease runs out may be granted to the next holder at the lease's end: CMD,
# which ignores SIGTERM, must be dead a margin before that (the core's loss margin, 50 ms for
# a 1 s lease), not at the same instant, which leaves only the next holder's start-up between
# them. On file:// a fencing token is the wall clock in µs at the grant (backends/file/
# README.md, "Fencing"), and the lease counts from after it: the lease ends 1 s after CMD's
# token at the earliest. That is compared with the last wall-clock stamp CMD wrote (one every
# 2 ms), and so is the grant of the next holder, queued meanwhile.
# Usage: lease_end_kills_before_regrant.sh DLOCK_BINARY (bash on PATH)
set -u
. "$(dirname "$0")/wait_gone.sh"
dlock=$1
dir=$(mktemp -d)
apid=
bpid=
cleanup() {
  for p in $apid $bpid; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT
uri="file://$dir/locks"
mkfifo "$dir/never"  # read -t on it: a 2 ms sleep without a fork
"$dlock" run --uri "$uri" --lease 1s --grace 5s job -- env LC_ALL=C bash -c "
  trap '' TERM
  exec 3<> '$dir/never'
  echo \$DLOCK_FENCING_TOKEN > '$dir/first-token'
  while :; do echo \${EPOCHREALTIME/[.,]/} >> '$dir/stamps'; read -t 0.002 -u 3; done" 2> "$dir/err" &
apid=$!
wait_started "$dir/stamps" "$dir/err" 0.01
# Queued behind it: takes the lock as soon as it is free.
"$dlock" run --uri "$uri" --wait 10s job -- sh -c "echo \$DLOCK_FENCING_TOKEN > '$dir/token'" &
bpid=$!
wait "$apid"; astatus=$?; apid=
wait "$bpid"; bstatus=$?; bpid=
cat "$dir/err"
[ "$astatus" -eq 70 ] || { echo "the first dlock exited $astatus, want 70 (lock lost)" >&2; exit 1; }
[ "$bstatus" -eq 0 ] || { echo "the waiting dlock exited $bstatus, want 0" >&2; exit 1; }
last=$(tail -n 1 "$dir/stamps")
first_token=$(cat "$dir/first-token")
token=$(cat "$dir/token")
now=$(($(date +%s%N) / 1000))
for t in "$first_token" "$token"; do
  if [ $((now - t)) -lt 0 ] || [ $((now - t)) -gt 60000000 ]; then
    echo "token $t is no wall-clock time in µs (now $now): this test's premise is gone" >&2
    exit 1
  fi
done
before_end=$(( (first_token + 1000000 - last) / 1000 ))
before_next=$(( (token - last) / 1000 ))
echo "the old CMD's last stamp came ${before_end} ms before its lease's end, ${before_next} ms before the next holder's grant"
# Half the margin: room for a late wake-up of dlock and the 2 ms between stamps.
if [ "$before_end" -lt 25 ]; then
  echo "CMD must be dead at least 25 ms (half the 50 ms loss margin) before the lease's end" >&2
  exit 1
fi
if [ "$before_next" -lt 0 ]; then
  echo "CMD ran on after the next holder got the lock" >&2
  exit 1
fi
