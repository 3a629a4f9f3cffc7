#!/usr/bin/env bash
# Installs a built dlock tree into a temporary prefix and builds + runs the consumer in
# tests/consumer against it twice: with find_package(dlock) and with pkg-config. Proves the
# installed package is usable by someone who has only the prefix.
#
# Usage: scripts/check-install.sh BUILD_DIR     (BUILD_DIR already built)
# Env:   CXX  compiler for the pkg-config consumer (default g++)
#        KEEP_PREFIX=1  keep the temporary prefix and print its path
set -euo pipefail

[[ $# -eq 1 && -d "$1" ]] || { echo "usage: $0 BUILD_DIR (a configured and built dlock tree)" >&2; exit 2; }
build=$(cd "$1" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cxx=${CXX:-g++}

work=$(mktemp -d /tmp/dlock-install-check.XXXXXX)
cleanup() {
  if [[ "${KEEP_PREFIX:-0}" == 1 ]]; then echo "check-install: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
prefix=$work/prefix

step() { echo "check-install: $*"; }
run_logged() {  # LOG CMD...: run quietly, print the log if it fails
  local log=$1; shift
  if ! "$@" >"$log" 2>&1; then
    echo "check-install: FAILED: $*" >&2
    cat "$log" >&2
    exit 1
  fi
}

step "installing $build into $prefix"
run_logged "$work/install.log" cmake --install "$build" --prefix "$prefix"

# The package must not point back into the build or source tree (it would work here only).
if leaks=$(grep -rlF -e "$build" -e "$repo" "$prefix/lib" "$prefix/share" --include='*.cmake' --include='*.pc' 2>/dev/null); then
  echo "check-install: FAILED: installed package files name the build/source tree:" >&2
  echo "$leaks" >&2
  exit 1
fi

step "consumer via find_package(dlock)"
run_logged "$work/cmake-configure.log" cmake -S "$repo/tests/consumer" -B "$work/cmake-build" \
  -G "Unix Makefiles" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
grep -E '^-- dlock ' "$work/cmake-configure.log" || true
run_logged "$work/cmake-build.log" cmake --build "$work/cmake-build" -j2
"$work/cmake-build/consumer"

step "consumer via pkg-config"
pc=$(find "$prefix" -name dlock.pc -print -quit)
[[ -n "$pc" ]] || { echo "check-install: FAILED: no dlock.pc installed under $prefix" >&2; exit 1; }
PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs dlock) || { echo "check-install: FAILED: pkg-config dlock" >&2; exit 1; }
echo "  pkg-config --cflags --libs dlock: $flags"
# shellcheck disable=SC2086  # the flags are meant to split
run_logged "$work/pc-build.log" "$cxx" -std=c++20 -Wall -Wextra -Werror -Wpedantic \
  "$repo/tests/consumer/main.cpp" $flags -o "$work/consumer-pc"
"$work/consumer-pc"

if [[ -x "$prefix/bin/dlock" ]]; then
  step "installed command line: $prefix/bin/dlock --help"
  run_logged "$work/cli.log" "$prefix/bin/dlock" --help
fi

step "ok: both consumers built and ran against the installed prefix"
