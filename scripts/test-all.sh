#!/usr/bin/env bash
# README command 2: everything CI checks, on one Debian 12 machine, no Docker.
#   1. installs build deps and the four servers (scripts/install-deps.sh --servers)
#   2. starts redis, mariadb, zookeeper (+ a 3-member zookeeper3), postgres (+ a hot standby) on loopback (scripts/servers.sh) and
#      stops them again on any exit (servers that were already running are left running)
#   3. builds everything with g++ into build/ (Release -O2, tests on, every backend required)
#   4. runs every test (all labels): ctest --test-dir build --output-on-failure, -j2 for
#      tests without the integration label, then the integration tests one at a time.
#      Meanwhile the builds of steps 6-8 run in the background at idle CPU priority
#      (SCHED_IDLE: they get only the CPU the tests leave, which waiting on servers leaves
#      plenty of); their output is printed, and counted, when the tests are done
#   5. prints the conformance table (build/conformance/conformance-table.md) if written
#   6. builds everything with clang++-14 and ASan+UBSan into build-clang/ (Debug; warnings are
#      errors) and runs the unit tests (label unit) on it: any sanitizer report fails the step
#   7. builds the core tests with TSan (g++) into build-tsan/ and runs them: any report fails
#   8. configures with hiredis hidden from pkg-config and DLOCK_WITH_MEM=OFF into
#      build-minimal/: redis must be left out (AUTO), =ON must fail, and the library, CLI,
#      bench and examples must build without redis and mem; then tests/embed builds dlock as
#      a subdirectory of another project (extras off, parent's settings untouched)
#   9. installs build/ into a temporary prefix and builds+runs tests/consumer against it
# Prints a summary; exits non-zero if any step failed.
#
# Usage: scripts/test-all.sh
# Env:   DLOCK_JOBS   parallel build/test jobs (default 2)
#        DLOCK_BUILD_DIR / DLOCK_CLANG_BUILD_DIR / DLOCK_TSAN_BUILD_DIR / DLOCK_MINIMAL_BUILD_DIR
#                     instead of build/, build-clang/, build-tsan/, build-minimal/
#        DLOCK_SKIP_CLANG=1  leave out steps 6 and 7 (e.g. while iterating locally)
#        and the servers' DLOCK_*_PORT / DLOCK_SERVERS_DIR (see scripts/servers.sh)
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
jobs=${DLOCK_JOBS:-2}
build=${DLOCK_BUILD_DIR:-build}
build_clang=${DLOCK_CLANG_BUILD_DIR:-build-clang}
build_tsan=${DLOCK_TSAN_BUILD_DIR:-build-tsan}
build_minimal=${DLOCK_MINIMAL_BUILD_DIR:-build-minimal}
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
if ! step "install dependencies and servers" scripts/install-deps.sh --servers --peers; then
  print_summary
  exit 1
fi

# ccache, when installed, makes rebuilding an unchanged tree almost free, also from another
# clone (paths are hashed relative to the repository): CI builds the tree four ways.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CCACHE_BASEDIR="$repo" CCACHE_NOHASHDIR=true
fi

# --- 2. servers
servers=(redis mariadb zookeeper zookeeper3 postgres postgres_standby)  # zookeeper3: the 3-member ensemble (conformance.zookeeper3); postgres_standby streams from postgres (PgStandby tests)
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
    -DDLOCK_BUILD_TESTS=ON -DDLOCK_BUILD_CONFORMANCE=ON -DDLOCK_BUILD_BENCH=ON \
    -DDLOCK_BUILD_EXAMPLES=ON -DDLOCK_BUILD_CLI=ON -DDLOCK_WERROR=ON "$@" || return
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

# --- the builds of steps 6-8, started now and run in the background
# They run at SCHED_IDLE priority: a test or a server that wants the CPU always gets it
# first, and the integration tests and the comparison spend most of their ten minutes waiting
# on servers and timeouts. Each writes its output to its own log and "<rc> <seconds>" to
# <n>.rc; side_done prints them in order, after the tests, and counts them like any step.

# Step 6: clang, Debug (the quickest build on two cores) with ASan and UBSan: checks that
# clang compiles the whole tree warning-free; the server-free tests run on it.
clang_build() {
  configure "$build_clang" Debug -DCMAKE_CXX_COMPILER=clang++-14 -DDLOCK_SANITIZE=address,undefined &&
    cmake --build "$build_clang" -j"$jobs" -- -k
}
# Step 7: TSan over the core tests (their own build: TSan cannot be mixed with ASan).
tsan_build() {
  cmake -S . -B "$build_tsan" -G "Unix Makefiles" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=g++ -DDLOCK_SANITIZE=thread \
      -DDLOCK_WERROR=ON -DDLOCK_BUILD_TESTS=ON -DDLOCK_BUILD_CONFORMANCE=OFF -DDLOCK_BUILD_BENCH=OFF \
      -DDLOCK_BUILD_EXAMPLES=OFF -DDLOCK_BUILD_CLI=OFF &&
    cmake --build "$build_tsan" -j"$jobs" --target dlock_core_tests
}
# Step 8: a machine without hiredis, and DLOCK_WITH_MEM=OFF.
# pkg-config sees every module but hiredis (PKG_CONFIG_LIBDIR replaces its search path).
minimal_build() {
  local pcdir log
  pcdir=$(mktemp -d /tmp/dlock-no-hiredis.XXXXXX) || return
  local d
  for d in $(pkg-config --variable pc_path pkg-config | tr ':' ' '); do
    [[ -d "$d" ]] || continue
    find "$d" -maxdepth 1 -name '*.pc' ! -name 'hiredis*.pc' -exec ln -sf {} "$pcdir/" \;
  done
  log=$(mktemp /tmp/dlock-minimal-configure.XXXXXX.log)
  local common=(-S . -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=g++
                -DDLOCK_WERROR=ON -DBUILD_TESTING=ON -DDLOCK_BUILD_CONFORMANCE=OFF)
  local rc=0
  # ON with the library missing must fail the configure.
  if PKG_CONFIG_LIBDIR=$pcdir cmake "${common[@]}" -B "$build_minimal-on" -DDLOCK_WITH_REDIS=ON >"$log" 2>&1; then
    echo "test-all: DLOCK_WITH_REDIS=ON configured without hiredis" >&2; rc=1
  fi
  rm -rf "$build_minimal-on"
  # AUTO leaves it out, and says so.
  if ! PKG_CONFIG_LIBDIR=$pcdir cmake "${common[@]}" -B "$build_minimal" -DDLOCK_WITH_REDIS=AUTO \
         -DDLOCK_WITH_MEM=OFF >"$log" 2>&1; then
    cat "$log" >&2; rc=1
  else
    grep -E 'redis backend left out|backends compiled in|without the redis floor|mem backend off' "$log"
    local compiled
    compiled=$(sed -n 's/^DLOCK_COMPILED_BACKENDS:INTERNAL=//p' "$build_minimal/CMakeCache.txt")
    if [[ ";$compiled;" == *";redis;"* || ";$compiled;" == *";mem;"* || ";$compiled;" != *";file;"* ]]; then
      echo "test-all: backends compiled in without hiredis and mem: '$compiled' (want file, no redis, no mem)" >&2
      rc=1
    fi
    grep -q 'redis backend left out' "$log" || { echo "test-all: AUTO did not say redis was left out" >&2; rc=1; }
    cmake --build "$build_minimal" -j"$jobs" --target dlock_cli dlock-bench dlock_example_basic stock_deduct \
      dlock_adapters || rc=1
    if [[ -x "$build_minimal/adapters/cli/dlock" ]] && "$build_minimal/adapters/cli/dlock" run --help | grep -q 'redis://'; then
      echo "test-all: the CLI without redis still offers redis://" >&2; rc=1
    fi
  fi
  rm -rf "$pcdir" "$log"
  return "$rc"
}

# dlock inside another project (tests/embed): extras off by default, the parent's settings
# untouched, dlock::dlock links.
embedded_build() {
  # Without redis: only to keep the step short (the minimal step covers redis missing).
  cmake -S tests/embed -B "$build_minimal-embed" -G "Unix Makefiles" -DCMAKE_CXX_COMPILER=g++ \
      -DDLOCK_WITH_REDIS=OFF &&
    cmake --build "$build_minimal-embed" -j"$jobs" --target embedded &&
    "$build_minimal-embed/embedded"
}

side_dir=$(mktemp -d /tmp/dlock-side.XXXXXX) || exit 1
side_pid=
side_step() {  # ID NAME CMD... (in the background job): <n>-<id>.name, .log, .rc
  local id=$1 name=$2; shift 2
  local f t0=$SECONDS rc
  f=$side_dir/$(printf '%02d' "$(find "$side_dir" -name '*.name' | wc -l)")-$id
  printf '%s\n' "$name" >"$f.name"
  "$@" >"$f.log" 2>&1
  rc=$?
  echo "$rc $((SECONDS - t0))" >"$f.rc"
  return "$rc"
}
side_builds() {
  chrt --idle -p 0 "$BASHPID" >/dev/null 2>&1 ||
    echo "test-all: SCHED_IDLE not available: the background builds run at normal priority" >&2
  if [[ "${DLOCK_SKIP_CLANG:-0}" != 1 ]]; then
    side_step clang "configure + build clang++-14 + ASan/UBSan ($build_clang/)" clang_build
    side_step tsan "configure + build g++ + TSan core tests ($build_tsan/)" tsan_build
  fi
  side_step minimal "no hiredis + DLOCK_WITH_MEM=OFF: configure and build ($build_minimal/)" minimal_build
  side_step embed "dlock embedded with add_subdirectory ($build_minimal-embed/)" embedded_build
}
# Waits for the background builds, then prints and counts each (one that never finished
# fails).
side_done() {
  [[ -n "$side_pid" ]] && wait "$side_pid"
  side_pid=
  local f name rc took
  for f in "$side_dir"/*.name; do
    [[ -e "$f" ]] || continue
    name=$(<"$f")
    echo
    echo "===== $name (in the background)"
    cat "${f%.name}.log"
    rc=1 took=-
    [[ -f "${f%.name}.rc" ]] && read -r rc took <"${f%.name}.rc"
    if ((rc == 0)); then
      summary+=("PASS  ${took}s  $name (background)")
    else
      summary+=("FAIL  ${took}s  $name (background, exit $rc)")
      failed=1
    fi
  done
}
side_passed() {  # ID: whether that background step passed
  local f
  for f in "$side_dir"/*-"$1".rc; do
    [[ -f "$f" && "$(cut -d' ' -f1 <"$f")" == 0 ]] && return 0
  done
  return 1
}
side_stop() {  # the background job is a process group of its own: its compilers go too
  [[ -n "$side_pid" ]] && kill -- -"$side_pid" 2>/dev/null
  rm -rf "$side_dir"
}
trap 'side_stop; stop_servers' EXIT
set -m  # job control, for this one job only: it gets its own process group
side_builds &
side_pid=$!
set +m

# --- 4. tests
# Every test, in two runs: those without the `integration` label in parallel, then the
# integration tests one at a time: they share one server per backend, and some restart it
# or kill every client connection on it (CLIENT KILL), which would fail a neighbour.
# --timeout is only the default for tests that set no TIMEOUT of their own.
run_ctest() {  # BUILD_DIR NAME CTEST_ARGS... (also the sanitized build of step 6)
  local dir=$1 name=$2; shift 2
  local failed_log=$dir/Testing/Temporary/LastTestsFailed.log line
  rm -f "$failed_log"
  if ! step "$name" ctest --test-dir "$dir" --output-on-failure --timeout 300 "$@"; then
    if [[ -s "$failed_log" ]]; then
      while IFS= read -r line; do summary+=("        failed test: ${line#*:}"); done <"$failed_log"
    fi
  fi
}
# A test labelled with a server backend's name counts as integration too, in case its
# `integration` label was lost (gtest_discover_tests splits a list given in PROPERTIES).
server_labels='integration|redis|mysql|mariadb|zookeeper|postgres'
if ((configured)); then
  run_ctest "$build" "ctest: tests needing no server (-j$jobs)" -LE "$server_labels" -j"$jobs"
  run_ctest "$build" "ctest: integration tests (one at a time)" -L "$server_labels" -j1
else
  skip "ctest" "the g++ configure failed"
fi

# Backend comparison, quick (issue 13): fails only if a row is missing; timings are not judged.
# It starts servers of its own (bench/compare.sh: other ports), so it disturbs none of these.
if ((built)); then
  step "bench/compare.sh --quick (every row produced)" env DLOCK_BUILD_DIR="$build" bench/compare.sh --quick --out "$build/compare-quick"
fi

# --- 5. conformance table
table=$build/conformance/conformance-table.md
if [[ -f "$table" ]]; then
  echo
  echo "===== $table"
  cat "$table"
fi

# --- 6. unit tests under ASan+UBSan (clang build above)
# Sanitizers stop at the first report and exit non-zero, so ctest counts it as a failure.
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
side_done
if [[ "${DLOCK_SKIP_CLANG:-0}" == 1 ]]; then
  skip "clang++-14 + ASan/UBSan build and unit tests" "DLOCK_SKIP_CLANG=1"
  skip "TSan core tests" "DLOCK_SKIP_CLANG=1"
else
  if side_passed clang; then
    # The fork tests run in step 4 only: clang 14's ASan allocator is not fork-safe (a parent
    # thread allocating at fork() leaves its lock held, and the child's first allocation
    # hangs: seen in 1 of 6 runs, the child blocked in SizeClassAllocator64), while glibc's
    # malloc, which the other builds use, is.
    echo "ctest ASan/UBSan: Fork.*, FileFork.* and MemFork.* left out (clang 14's ASan allocator is not fork-safe)"
    run_ctest "$build_clang" "ctest ASan/UBSan: unit tests (-j$jobs)" -L unit -LE "$server_labels" \
      -E '^(Fork|FileFork|MemFork)\.' -j"$jobs"
  fi
  # --- 7. TSan: core tests. Run directly: ctest would also list the tests of targets the
  # TSan build leaves out.
  if side_passed tsan; then
    step "TSan: core tests" "$build_tsan/core/tests/dlock_core_tests" --gtest_brief=1
  fi
fi

# --- 9. install + consumer
if ((built)); then
  step "install + consumer check" scripts/check-install.sh "$build"
else
  skip "install + consumer check" "the g++ build failed"
fi

stop_servers
print_summary
exit "$failed"
