#!/bin/sh
# A session lock that is lost (here: its server connection terminated) may be granted to
# someone else at once, so `dlock run` follows SIGTERM with SIGKILL at once instead of giving
# CMD --grace to go on working beside the next holder.
# Usage: lost_session_is_killed_at_once.sh DLOCK_BINARY (DLOCK_TEST_POSTGRES_URI set, psql on PATH)
set -u
dlock=$1
uri=${DLOCK_TEST_POSTGRES_URI:-}
[ -n "$uri" ] || { echo "DLOCK_TEST_POSTGRES_URI is not set (scripts/servers.sh env)" >&2; exit 1; }
dir=$(mktemp -d)
app=dlock-lost-$$
cleanup() { kill -9 "$pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
# CMD ignores SIGTERM: only the SIGKILL ends it. --grace 8s would let it run 8 s more.
"$dlock" run --uri "$uri?application_name=$app" --grace 8s lost-session-kill -- \
  sh -c "trap '' TERM; touch $dir/started; while :; do sleep 0.05; done" 2> "$dir/err" &
pid=$!
i=0
while [ ! -e "$dir/started" ]; do
  i=$((i + 1)); [ $i -lt 200 ] || { echo "CMD never started" >&2; cat "$dir/err" >&2; exit 1; }
  sleep 0.05
done
killed=$(psql -Atq "$uri" -c "select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name = '$app'")
[ "$killed" -ge 1 ] || { echo "no server session named $app to terminate" >&2; exit 1; }
start=$(date +%s%N)
i=0
while kill -0 "$pid" 2>/dev/null; do
  i=$((i + 1)); [ $i -lt 300 ] || { echo "dlock still running 15 s after its session ended" >&2; exit 1; }
  sleep 0.05
done
wait "$pid"; status=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$dir/err"
[ "$status" -eq 70 ] || { echo "dlock exited $status, expected 70 (lock lost)" >&2; exit 1; }
# The loss is seen within milliseconds of the termination; 3 s leaves room for a slow machine.
if [ "$ms" -gt 3000 ]; then
  echo "CMD ran on ${ms} ms after the session ended (--grace 8s): it must be killed at once" >&2
  exit 1
fi
echo "CMD was killed ${ms} ms after its session ended"
