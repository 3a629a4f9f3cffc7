#!/usr/bin/env bash
# README command 2: everything CI checks, on one Debian 12 machine, no Docker.
#   1. installs build deps and the four servers (scripts/install-deps.sh --servers)
#   2. starts redis, mariadb, zookeeper, postgres on loopback (scripts/servers.sh) and
#      stops them again on any exit (servers that were already running are left running)
#   3. builds everything with g++ into build/ (Release -O2, tests on, every backend required)
#   4. runs every test (all labels): ctest --test-dir build --output-on-failure, -j2 for
#      tests without the integration label, then the integration tests one at a time
#   5. prints the conformance table (build/conformance/conformance-table.md) if written
#   6. builds everything with clang++-14 into build-clang/ (Debug; warnings are errors; no tests)
#   7. installs build/ into a temporary prefix and builds+runs tests/consumer against it
# Prints a summary; exits non-zero if any step failed.
#
# Usage: scripts/test-all.sh
# Env:   DLOCK_JOBS   parallel build/test jobs (default 2)
#        DLOCK_BUILD_DIR / DLOCK_CLANG_BUILD_DIR  instead of build/ and build-clang/
#        DLOCK_SKIP_CLANG=1  leave out step 6 (e.g. while iterating locally)
#        and the servers' DLOCK_*_PORT / DLOCK_SERVERS_DIR (see scripts/servers.sh)
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
jobs=${DLOCK_JOBS:-2}
build=${DLOCK_BUILD_DIR:-build}
build_clang=${DLOCK_CLANG_BUILD_DIR:-build-clang}
start_time=$SECONDS
summary=()
failed=0

# Runs one step, records PASS/FAIL with its duration; never exits.
step() {  # NAME CMD...
  local name=$1; shift
  local t0=$SECONDS rc
  echo
  echo "===== $name"
  "$@"
  rc=$?
  local took=$((SECONDS - t0))
  if ((rc == 0)); then
    summary+=("PASS  ${took}s  $name")
  else
    summary+=("FAIL  ${took}s  $name (exit $rc)")
    failed=1
  fi
  return "$rc"
}

skip() {  # NAME REASON (a skip forced by a failure: that failure already counts)
  summary+=("SKIP  -     $1 ($2)")
}

print_summary() {
  echo
  echo "===== summary ($(((SECONDS - start_time) / 60))m$(((SECONDS - start_time) % 60))s)"
  printf '  %s\n' "${summary[@]}"
  if ((failed)); then echo "test-all: FAILED"; else echo "test-all: all steps passed"; fi
}

# --- 1. dependencies (nothing else can run without them)
if ! step "install dependencies and servers" scripts/install-deps.sh --servers; then
  print_summary
  exit 1
fi

# --- 2. servers
servers=(redis mariadb zookeeper postgres)
ours=()  # the servers this run starts, and so stops
for s in "${servers[@]}"; do
  scripts/servers.sh status "$s" >/dev/null 2>&1 || ours+=("$s")
done
stop_servers() {
  if ((${#ours[@]})); then
    echo
    echo "===== stopping servers: ${ours[*]}"
    scripts/servers.sh stop "${ours[@]}" || echo "test-all: stopping servers failed" >&2
    ours=()
  fi
}
trap stop_servers EXIT
trap 'echo "test-all: interrupted" >&2; exit 130' INT TERM

if ! step "start servers" scripts/servers.sh start "${servers[@]}"; then
  print_summary
  exit 1
fi
server_env=$(scripts/servers.sh env "${servers[@]}")
eval "$server_env"
echo "$server_env"

# --- 3. g++ build with every backend required
# Turns every DLOCK_WITH_<BACKEND> option the tree declares to ON, so a backend whose
# dependencies are not found fails the configure instead of silently dropping its tests.
configure() {  # BUILD_DIR BUILD_TYPE CMAKE_ARGS...
  local dir=$1 type=$2; shift 2
  cmake -S . -B "$dir" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE="$type" -DBUILD_TESTING=ON \
    -DDLOCK_BUILD_CONFORMANCE=ON -DDLOCK_BUILD_BENCH=ON -DDLOCK_BUILD_EXAMPLES=ON \
    -DDLOCK_BUILD_CLI=ON "$@" || return
  local opts
  opts=$(sed -n 's/^\(DLOCK_WITH_[A-Z0-9_]*\):.*/-D\1=ON/p' "$dir/CMakeCache.txt" | sort -u)
  # shellcheck disable=SC2086  # one -D flag per word
  cmake -S . -B "$dir" $opts
}

# Release at -O2, as scripts/demo.sh builds (so the two share build/): quicker to build on two
# cores than -O3, and as fast for a lock client that waits on the network.
# The build keeps going past a failing target (make -k) so one run shows every error, and
# the tests that did build still run.
configured=0
built=0
if step "configure g++ ($build/)" configure "$build" Release -DCMAKE_CXX_COMPILER=g++ \
     -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG"; then
  configured=1
  step "build g++ ($build/)" cmake --build "$build" -j"$jobs" -- -k && built=1
fi

# --- 4. tests
# Every test, in two runs: those without the `integration` label in parallel, then the
# integration tests one at a time: they share one server per backend, and some restart it
# or kill every client connection on it (CLIENT KILL), which would fail a neighbour.
# --timeout is only the default for tests that set no TIMEOUT of their own.
run_ctest() {  # NAME CTEST_ARGS...
  local name=$1; shift
  local failed_log=$build/Testing/Temporary/LastTestsFailed.log line
  rm -f "$failed_log"
  if ! step "$name" ctest --test-dir "$build" --output-on-failure --timeout 300 "$@"; then
    if [[ -s "$failed_log" ]]; then
      while IFS= read -r line; do summary+=("        failed test: ${line#*:}"); done <"$failed_log"
    fi
  fi
}
# A test labelled with a server backend's name counts as integration too, in case its
# `integration` label was lost (gtest_discover_tests splits a list given in PROPERTIES).
server_labels='integration|redis|mysql|mariadb|zookeeper|postgres'
if ((configured)); then
  run_ctest "ctest: tests needing no server (-j$jobs)" -LE "$server_labels" -j"$jobs"
  run_ctest "ctest: integration tests (one at a time)" -L "$server_labels" -j1
else
  skip "ctest" "the g++ configure failed"
fi

# --- 5. conformance table
table=$build/conformance/conformance-table.md
if [[ -f "$table" ]]; then
  echo
  echo "===== $table"
  cat "$table"
fi

# --- 6. clang build
if [[ "${DLOCK_SKIP_CLANG:-0}" == 1 ]]; then
  skip "clang++-14 build" "DLOCK_SKIP_CLANG=1"
else
  # Debug: this build only checks that clang compiles the tree warning-free, and -O0 is the
  # quickest way there on two cores.
  step "configure clang++-14 ($build_clang/)" configure "$build_clang" Debug \
      -DCMAKE_CXX_COMPILER=clang++-14 &&
    step "build clang++-14 ($build_clang/)" cmake --build "$build_clang" -j"$jobs" -- -k
fi

# --- 7. install + consumer
if ((built)); then
  step "install + consumer check" scripts/check-install.sh "$build"
else
  skip "install + consumer check" "the g++ build failed"
fi

stop_servers
print_summary
exit "$failed"
