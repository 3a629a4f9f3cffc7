# Sourced by the CLI's test scripts (POSIX sh).
#
# running PID: the process exists and is no zombie (a killed CMD stays one until its parent
# reaps it).
running() { case $(ps -o stat= -p "$1" 2>/dev/null) in '' | Z*) return 1 ;; esac; }
#
# wait_gone PID SECONDS MESSAGE: waits, polling every 50 ms, until PID no longer runs, and
# sets `ms` to how long that took; exits the script with MESSAGE if it still runs after
# SECONDS (a whole number).
wait_gone() {
  _start=$(date +%s%N)
  _i=0
  while running "$1"; do
    _i=$((_i + 1))
    if [ "$_i" -ge $(($2 * 20)) ]; then
      echo "$3" >&2
      exit 1
    fi
    sleep 0.05
  done
  ms=$(( ($(date +%s%N) - _start) / 1000000 ))
}
#
# wait_started FILE ERR STEP: waits, polling 200 times every STEP seconds, until CMD has
# written FILE (non-empty); exits the script with "CMD never started" and dlock's stderr
# (the file ERR) if it has not.
wait_started() {
  _i=0
  while [ ! -s "$1" ]; do
    _i=$((_i + 1))
    if [ "$_i" -ge 200 ]; then
      echo "CMD never started" >&2
      cat "$2" >&2
      exit 1
    fi
    sleep "$3"
  done
}
#
# find_guard DLOCK_PID: sets `guard` to the pid of dlock's guard process (its child running
# __guard); exits the script if dlock has none.
find_guard() {
  guard=$(ps --ppid "$1" -o pid=,args= | awk '$3 == "__guard" { print $1 }')
  [ -n "$guard" ] || { echo "no guard process under dlock $1" >&2; exit 1; }
}
#
# stop_guard DLOCK_PID: find_guard, then stops it (SIGSTOP).
stop_guard() {
  find_guard "$1"
  kill -STOP "$guard"
}
