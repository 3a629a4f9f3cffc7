#!/usr/bin/env bash
# Installs what dlock needs from Debian 12's packages: the build dependencies and, with
# --servers, the four servers the integration tests start (scripts/servers.sh).
#
# Usage: scripts/install-deps.sh [--servers] [--peers]
#   --servers  also the four servers the integration tests start
#   --peers    also the peer lock libraries the benchmarks compare against (redis-py, kazoo,
#              tooz with its drivers, MySQLdb, psycopg2, Curator with a JDK to compile its client)
#              and gnuplot for bench/compare.sh's plots
#
# Idempotent: packages already installed are left alone (apt-get update runs only when
# something is missing). Quiet: apt's output goes to a log that is printed only on failure.
# Needs root (or sudo). Services are never started by the packages' install scripts: the
# tests start their own servers on non-default ports.
set -euo pipefail

usage() { echo "usage: $0 [--servers] [--peers]" >&2; exit 2; }

with_servers=0
with_peers=0
for arg in "$@"; do
  case "$arg" in
    --servers) with_servers=1 ;;
    --peers) with_peers=1 ;;
    -h|--help) echo "usage: $0 [--servers] [--peers]"; exit 0 ;;
    *) usage ;;
  esac
done

# Build toolchain, the libraries core/backends/adapters/tests link, and the client
# libraries of the optional backends (mysql, zookeeper, postgres). `locales` holds the locale
# sources a unit test compiles de_DE from (Duration.IgnoresTheProcessLocale).
build_pkgs=(g++ clang-14 cmake make pkg-config libssl-dev libhiredis-dev libfmt-dev libcli11-dev liburiparser-dev
            libgtest-dev libgmock-dev libbenchmark-dev netcat-openbsd python3 locales ccache
            libmysqlcppconn-dev libzookeeper-mt-dev libzookeeper-st2 libpq-dev)
# zookeeper depends on default-jre; default-jre-headless is what the JVM needs to run it here.
# redis-tools, mariadb-client and postgresql-client come in with their servers.
server_pkgs=(redis-server mariadb-server zookeeper default-jre-headless postgresql)
# Peers for side-by-side benchmarks (Debian's python3 modules; Curator needs javac).
peer_pkgs=(python3-redis python3-kazoo python3-tooz python3-mysqldb python3-psycopg2 python3-pymysql
           libcurator-client-java libcurator-framework-java libcurator-recipes-java default-jdk-headless
           gnuplot-nox)  # bench/compare.sh's SVG plots

pkgs=("${build_pkgs[@]}")
if (( with_servers )); then pkgs+=("${server_pkgs[@]}"); fi
if (( with_peers )); then pkgs+=("${peer_pkgs[@]}"); fi

missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if (( ${#missing[@]} == 0 )); then
  echo "install-deps: all ${#pkgs[@]} packages already installed"
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi

log=$(mktemp /tmp/dlock-install-deps.XXXXXX.log)
policy=/usr/sbin/policy-rc.d
created_policy=0
cleanup() {
  # Remove the service-start block only if this script put it there.
  if (( created_policy )); then $SUDO rm -f "$policy"; fi
}
trap cleanup EXIT

# Keep the packages' maintainer scripts from starting redis/mariadb/postgres/zookeeper on
# their default ports (101 = "action forbidden" for invoke-rc.d).
if [[ ! -e "$policy" ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  created_policy=1
fi

apt_opts=(-q -y -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
echo "install-deps: installing ${missing[*]}"
if ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update >"$log" 2>&1 ||
   ! $SUDO env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install --no-install-recommends \
       "${missing[@]}" >>"$log" 2>&1; then
  echo "install-deps: apt-get failed; its output:" >&2
  cat "$log" >&2
  exit 1
fi
rm -f "$log"
echo "install-deps: done"
