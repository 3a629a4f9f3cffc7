#!/usr/bin/env bash
# The backend comparison (issue 13) in one command: starts private servers, builds
# dlock-bench and dlock-compare-probe, measures every compiled backend and every peer
# library, and writes bench/results/<date>.md, .json and .svg plots.
#
# Usage: bench/compare.sh [--quick] [--out DIR] [--keep-servers] [--only ID,...]
#   --quick         CI variant (< 2 minutes): shorter loops, no server restarts
#   --out DIR       where the results go (default bench/results; --quick: build/compare-quick)
#   --keep-servers  leave the servers it started running
#   --only IDS      measure only rows whose id contains one of IDS (e.g. redis,zookeeper)
#
# Servers: its own scripts/servers.sh instances, never a user's or CI's: DLOCK_SERVERS_DIR is
# $DLOCK_COMPARE_DIR (default /tmp/dlock-compare-$UID) and the ports are DLOCK_COMPARE_*_PORT
# (defaults 26379 redis, 26306 mariadb, 26181 zookeeper, 26281-26283 zookeeper3 with quorum
# ports 26381.., 26432 postgres). The run kills and restarts them (crash cells).
# Build: $DLOCK_BUILD_DIR (default build/), configured if missing. Peers and plots need the
# Debian packages of scripts/install-deps.sh --peers (python3-redis, -kazoo, -tooz, -mysqldb,
# -psycopg2, libcurator-*-java, default-jdk-headless, gnuplot-nox).
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." && pwd)
QUICK=() OUT="" KEEP=0 ONLY=()
while (($#)); do
  case "$1" in
    --quick) QUICK=(--quick) ;;
    --out) OUT=${2:?--out needs a directory}; shift ;;
    --keep-servers) KEEP=1 ;;
    --only) ONLY=(--only "${2:?--only needs ids}"); shift ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -n "$OUT" ]] || { ((${#QUICK[@]})) && OUT=$ROOT/build/compare-quick || OUT=$ROOT/bench/results; }

export DLOCK_SERVERS_DIR=${DLOCK_COMPARE_DIR:-/tmp/dlock-compare-$(id -u)}
export DLOCK_REDIS_PORT=${DLOCK_COMPARE_REDIS_PORT:-26379}
export DLOCK_MARIADB_PORT=${DLOCK_COMPARE_MARIADB_PORT:-26306}
export DLOCK_ZOOKEEPER_PORT=${DLOCK_COMPARE_ZOOKEEPER_PORT:-26181}
export DLOCK_ZOOKEEPER3_PORT=${DLOCK_COMPARE_ZOOKEEPER3_PORT:-26281}
export DLOCK_ZOOKEEPER3_PEER_PORT=${DLOCK_COMPARE_ZOOKEEPER3_PEER_PORT:-26381}
export DLOCK_POSTGRES_PORT=${DLOCK_COMPARE_POSTGRES_PORT:-26432}
export DLOCK_ZOOKEEPER_FSYNC=yes  # the server's default behaviour: it fsyncs every write
SERVERS="$ROOT/scripts/servers.sh"

BUILD=${DLOCK_BUILD_DIR:-$ROOT/build}
if [[ ! -f "$BUILD/CMakeCache.txt" ]]; then
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD" --target dlock-bench dlock-compare-probe -j2 >/dev/null

# Which backends the build has decides which servers to start.
compiled=$(sed -n "s/^DLOCK_COMPILED_BACKENDS:INTERNAL=//p" "$BUILD/CMakeCache.txt")
want=()
for pair in redis:redis mysql:mariadb postgres:postgres zookeeper:zookeeper; do
  [[ ";$compiled;" == *";${pair%%:*};"* ]] && want+=("${pair#*:}")
done
[[ ";$compiled;" == *";zookeeper;"* ]] && want+=(zookeeper3)
started=()
# Set before the first start: a start that fails ends the script (set -e), and what it and
# the starts before it left running must be stopped too.
cleanup() { ((KEEP)) || ((${#started[@]} == 0)) || "$SERVERS" stop "${started[@]}" >&2 || true; }
trap cleanup EXIT
for s in "${want[@]}"; do
  "$SERVERS" status "$s" >/dev/null 2>&1 || started+=("$s")
  "$SERVERS" start "$s" >&2
done
eval "$("$SERVERS" env redis mariadb zookeeper postgres zookeeper3-1)"

/usr/bin/python3 "$ROOT/bench/compare/compare.py" --bench "$BUILD/bench/dlock-bench" \
  --probe "$BUILD/bench/dlock-compare-probe" --servers-script "$SERVERS" --out "$OUT" "${QUICK[@]}" "${ONLY[@]}"
