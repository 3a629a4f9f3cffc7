#!/usr/bin/env bash
# README command 1: see dlock work in a minute, no server needed.
# Installs the build dependencies, builds dlock (Release, into build/), then runs the
# inventory demo (examples/inventory/demo.sh): several processes deduct stock through
# `dlock run` on the embedded file:// backend, and it prints what happened.
#
# Usage: scripts/demo.sh
# Env:   DLOCK_BUILD_DIR  build directory (default build)
#        DLOCK_JOBS       parallel build jobs (default 2)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
build=${DLOCK_BUILD_DIR:-build}
jobs=${DLOCK_JOBS:-2}
demo=examples/inventory/demo.sh

# Fail before a long build if the demo itself is not there.
if [[ ! -f "$demo" ]]; then
  echo "demo.sh: $demo is missing: this checkout has no inventory demo yet" >&2
  exit 1
fi

echo "== installing build dependencies"
scripts/install-deps.sh

echo "== configuring ($build, Release)"
# Tests and benchmarks are not needed to run the demo (scripts/test-all.sh builds them).
log=$(mktemp /tmp/dlock-demo-configure.XXXXXX.log)
# Release at -O2, as scripts/test-all.sh builds (so the two share build/): quicker to build on
# two cores than -O3, and as fast for a lock client that waits on the network.
cmake -S . -B "$build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" \
  -DBUILD_TESTING=OFF -DDLOCK_BUILD_BENCH=OFF -DDLOCK_BUILD_CLI=ON -DDLOCK_BUILD_EXAMPLES=ON \
  >"$log" 2>&1 || { cat "$log" >&2; rm -f "$log"; exit 1; }
rm -f "$log"

echo "== building (-j$jobs)"
cmake --build "$build" -j"$jobs"

echo "== running $demo"
if [[ -x "$demo" ]]; then exec "$demo" "$build"; else exec sh "$demo" "$build"; fi
