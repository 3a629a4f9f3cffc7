#!/usr/bin/env bash
# Starts and stops real Redis, MariaDB, ZooKeeper and PostgreSQL servers on 127.0.0.1, on
# non-default ports, without systemd or Docker, for dlock's integration tests and benchmarks.
#
# Usage: scripts/servers.sh {start|stop|restart|status|env} [NAME...]
#   NAME: redis | mariadb | zookeeper | postgres | all (the default)
#         | zookeeper3 (a 3-member ensemble on loopback; not in `all`) | zookeeper3-1..3 (one member)
#         | postgres_standby (a hot standby of `postgres`, streaming from it; not in `all`;
#           start it after postgres)
#   start    start each server (no-op if it already runs); waits until it answers
#   stop     stop each server by its recorded PID and wait until the process is gone
#   restart  stop + start with the same data dir and port (tests use it to restart a server)
#   status   one line per server; exit 0 if all named servers run, 3 otherwise
#   env      print `export DLOCK_TEST_<NAME>_URI=…` for each running server (mariadb's
#            also as DLOCK_TEST_MYSQL_URI, the backend's name) and
#            `export DLOCK_SERVERS_SCRIPT=…`: use as  eval "$(scripts/servers.sh env)"
#
# Environment:
#   DLOCK_SERVERS_DIR       where each server gets its own dir (default /tmp/dlock-servers)
#   DLOCK_REDIS_PORT        default 16379
#   DLOCK_MARIADB_PORT      default 13306
#   DLOCK_ZOOKEEPER_PORT    default 12181
#   DLOCK_ZOOKEEPER_FSYNC   "yes": the test ZooKeeper fsyncs every write (the server's default,
#                           for benchmarks); otherwise it runs with forceSync=no (tests)
#   DLOCK_ZOOKEEPER3_PORT   default 12281: client ports of zookeeper3's members are it, +1, +2
#   DLOCK_ZOOKEEPER3_PEER_PORT  default 12381: quorum ports are it, +1, +2; election +10..+12
#   DLOCK_POSTGRES_PORT     default 15432
#   DLOCK_POSTGRES_STANDBY_PORT  default 15433
#   DLOCK_SERVERS_TIMEOUT   seconds to wait for a server to answer / to exit (default 30)
#
# Each server's dir holds its data, its log, `pid` and `port`. A running server keeps the
# port it was started with; restart reuses it. Servers are detached (own session, stdio on
# their log), so a test that restarts one does not hold the test's output pipe open.
# Install the servers with scripts/install-deps.sh --servers (Debian 12 packages).
set -euo pipefail

SCRIPT_PATH=$(readlink -f "${BASH_SOURCE[0]}")
ROOT=$(realpath -m "${DLOCK_SERVERS_DIR:-/tmp/dlock-servers}")  # absolute: servers run elsewhere
TIMEOUT=${DLOCK_SERVERS_TIMEOUT:-30}
ALL=(redis mariadb zookeeper postgres)
export PATH="$PATH:/usr/sbin:/sbin"

# MariaDB account the tests use (a test password for a loopback-only throwaway server).
MARIADB_DB=dlock
MARIADB_USER=dlock
MARIADB_PASSWORD=dlock-test-pw

die() { echo "servers.sh: $*" >&2; exit 1; }
say() { echo "servers.sh: $*"; }

default_port() {
  case "$1" in
    redis) echo "${DLOCK_REDIS_PORT:-16379}" ;;
    mariadb) echo "${DLOCK_MARIADB_PORT:-13306}" ;;
    zookeeper) echo "${DLOCK_ZOOKEEPER_PORT:-12181}" ;;
    zookeeper3-[123]) echo $((${DLOCK_ZOOKEEPER3_PORT:-12281} + ${1#zookeeper3-} - 1)) ;;
    postgres) echo "${DLOCK_POSTGRES_PORT:-15432}" ;;
    postgres_standby) echo "${DLOCK_POSTGRES_STANDBY_PORT:-15433}" ;;
  esac
}

# The process name each server's PID must have (guards against a recycled PID).
process_name() {
  case "$1" in
    redis) echo redis-server ;;
    mariadb) echo mariadbd ;;
    zookeeper | zookeeper3-[123]) echo java ;;
    postgres | postgres_standby) echo postgres ;;
  esac
}

dir_of() { echo "$ROOT/$1"; }

recorded_pid() {
  local f; f="$(dir_of "$1")/pid"
  [[ -s "$f" ]] && head -n1 "$f" | tr -dc 0-9
}

recorded_port() {
  local f; f="$(dir_of "$1")/port"
  [[ -s "$f" ]] && tr -dc 0-9 <"$f"
}

# True while PID is a live process (a thread of it runs). A zombie counts as gone: it holds no
# port or file, and the reaper here (PID 1 of a VM or container) may take a second or more to
# collect it.
live_pid() {
  local task state
  kill -0 "$1" 2>/dev/null || return 1
  # Every thread, not the process's first one only: a JVM's main thread may exit first, and
  # /proc/PID/stat then says zombie while its other threads still shut down holding its ports.
  for task in "/proc/$1/task/"*/stat; do
    state=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "$task" 2>/dev/null) || continue
    [[ "$state" != Z && "$state" != X ]] && return 0
  done
  return 1
}

alive() {  # PID NAME: true if PID runs and is the expected program
  local pid=$1 want=$2 comm
  [[ -n "$pid" ]] && live_pid "$pid" || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  [[ "$comm" == "$want"* ]]
}

running() { alive "$(recorded_pid "$1")" "$(process_name "$1")"; }

port_open() { nc -z -w1 127.0.0.1 "$1" >/dev/null 2>&1; }

show_log() {  # NAME LOGFILE...: print the logs of a server that failed
  local name=$1; shift
  local f
  for f in "$@"; do
    [[ -f "$f" ]] || continue
    echo "----- $name: tail of $f -----" >&2
    tail -n 60 "$f" >&2
  done
}

# Runs a command detached from our session and stdio, recording its PID in PIDFILE: the
# inner shell writes its own PID and then execs the server, so the PID is the server's.
spawn() {  # PIDFILE LOGFILE CMD...
  local pidfile=$1 log=$2; shift 2
  rm -f "$pidfile"
  # shellcheck disable=SC2016  # expanded by the inner shell
  # DLOCK_SERVERS_TEST_SPAWN_DELAY (seconds, tests only) widens the moment between the two.
  setsid -f bash -c 'echo $$ >"$1"; shift; [[ -z "${DLOCK_SERVERS_TEST_SPAWN_DELAY:-}" ]] ||
    sleep "$DLOCK_SERVERS_TEST_SPAWN_DELAY"; exec "$@"' spawn "$pidfile" "$@" </dev/null >>"$log" 2>&1
}

wait_for_file() {  # FILE: bounded wait for a non-empty file
  local i
  for ((i = 0; i < 50; i++)); do [[ -s "$1" ]] && return 0; sleep 0.1; done
  return 1
}

# Polls PROBE until it succeeds; fails early if the server process dies.
wait_ready() {  # NAME PROBE...
  local name=$1; shift
  local deadline=$((SECONDS + TIMEOUT))
  while ((SECONDS < deadline)); do
    # Until spawn()'s shell has exec'ed the server, the recorded pid is that bash's.
    if ! running "$name" && ! alive "$(recorded_pid "$name")" bash; then
      echo "servers.sh: $name exited during startup" >&2
      return 1
    fi
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "servers.sh: $name did not answer within ${TIMEOUT}s" >&2
  return 1
}

# ---------------------------------------------------------------- redis
redis_probe() { [[ "$(timeout 2 redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" == PONG ]]; }

start_redis() {
  local d=$1 port=$2
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "$d/pid" --dir "$d" --logfile "$d/redis.log" </dev/null >>"$d/redis.log" 2>&1 ||
    { show_log redis "$d/redis.log"; return 1; }
  wait_for_file "$d/pid" || { show_log redis "$d/redis.log"; return 1; }
  wait_ready redis redis_probe "$port" || { show_log redis "$d/redis.log"; return 1; }
}

stop_redis() {  # polite shutdown; the caller falls back to signals
  timeout 5 redis-cli -h 127.0.0.1 -p "$2" shutdown nosave >/dev/null 2>&1 || true
}

# ---------------------------------------------------------------- mariadb
mariadb_probe() {
  timeout 3 mariadb-admin --no-defaults -h127.0.0.1 -P"$1" -uroot --connect-timeout=2 ping 2>/dev/null |
    grep -q alive
}

start_mariadb() {
  local d=$1 port=$2 user
  user=$(id -un)
  if [[ ! -d "$d/data/mysql" ]]; then
    mariadb-install-db --no-defaults --datadir="$d/data" --user="$user" \
      --auth-root-authentication-method=normal --skip-test-db >"$d/install-db.log" 2>&1 ||
      { show_log mariadb "$d/install-db.log"; return 1; }
  fi
  spawn "$d/pid" "$d/mariadb.log" mariadbd --no-defaults --datadir="$d/data" --socket="$d/my.sock" \
    --port="$port" --bind-address=127.0.0.1 --user="$user" --pid-file="$d/mariadbd.pid" \
    --skip-name-resolve --log-error="$d/mariadb.log"
  wait_for_file "$d/pid" || { show_log mariadb "$d/mariadb.log"; return 1; }
  wait_ready mariadb mariadb_probe "$port" || { show_log mariadb "$d/mariadb.log"; return 1; }
  # Idempotent: the database and account survive a restart, so IF NOT EXISTS. The user also
  # owns every database named dlock_* (a conformance case creates its own) and has PROCESS
  # (the mysql conformance saboteur reads information_schema.INNODB_TRX to find holders).
  timeout 10 mariadb --no-defaults -h127.0.0.1 -P"$port" -uroot -e "
    CREATE DATABASE IF NOT EXISTS \`$MARIADB_DB\`;
    CREATE USER IF NOT EXISTS '$MARIADB_USER'@'%' IDENTIFIED BY '$MARIADB_PASSWORD';
    GRANT ALL PRIVILEGES ON \`$MARIADB_DB\`.* TO '$MARIADB_USER'@'%';
    GRANT ALL PRIVILEGES ON \`${MARIADB_DB}\\_%\`.* TO '$MARIADB_USER'@'%';
    GRANT PROCESS ON *.* TO '$MARIADB_USER'@'%';" >>"$d/mariadb.log" 2>&1 ||
    { echo "servers.sh: mariadb: creating database/user failed" >&2; show_log mariadb "$d/mariadb.log"; return 1; }
}

stop_mariadb() {
  timeout 10 mariadb-admin --no-defaults -h127.0.0.1 -P"$2" -uroot shutdown >/dev/null 2>&1 || true
}

# ---------------------------------------------------------------- zookeeper
zookeeper_mode() {  # PORT: the srvr Mode line's value (standalone, leader, follower) or nothing
  echo srvr | timeout 2 nc -N -w1 127.0.0.1 "$1" 2>/dev/null | sed -n 's/^Mode: //p'
}

zookeeper_probe() {
  [[ "$(echo ruok | timeout 2 nc -N -w1 127.0.0.1 "$1" 2>/dev/null)" == imok ]] &&
    [[ "$(zookeeper_mode "$1")" == standalone ]]
}

# The settings every test ZooKeeper shares. tickTime 500 ms lets clients ask for sessions
# down to 1 s (tests of session expiry); minSessionTimeout states that bound explicitly.
# forceSync=no: a write is acknowledged before its fsync (tests run much faster); set
# DLOCK_ZOOKEEPER_FSYNC=yes for the server's default, fsyncing, behaviour (benchmarks).
zookeeper_common_cfg() {  # DIR PORT
  cat <<EOF
tickTime=500
minSessionTimeout=1000
maxSessionTimeout=60000
dataDir=$1/data
clientPort=$2
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok,stat,mntr,conf,wchs,cons
EOF
  [[ "${DLOCK_ZOOKEEPER_FSYNC:-no}" == yes ]] || echo "forceSync=no"
}

spawn_zookeeper() {  # DIR JAVA_ARGS...
  local d=$1; shift
  # slf4j-log4j12 + log4j 1.2 (dependencies of libzookeeper-java) make the server log to
  # its console, i.e. our log file; without them it logs nothing.
  local cp=/etc/zookeeper/conf:/usr/share/java/zookeeper.jar j
  for j in slf4j-log4j12 log4j-1.2; do
    [[ -f /usr/share/java/$j.jar ]] && cp+=":/usr/share/java/$j.jar"
  done
  # Empty containers (the per-name lock parents) are reaped every second instead of every
  # minute, so tests see the reaping and the acquire racing with it.
  spawn "$d/pid" "$d/zookeeper.log" java "$@" -Dznode.container.checkIntervalMs=1000 \
    -Dzookeeper.root.logger=INFO,CONSOLE -Dzookeeper.log.dir="$d" \
    -cp "$cp" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/zoo.cfg"
}

start_zookeeper() {
  local d=$1 port=$2
  mkdir -p "$d/data"
  zookeeper_common_cfg "$d" "$port" >"$d/zoo.cfg"
  spawn_zookeeper "$d" -Xms256m -Xmx512m
  wait_for_file "$d/pid" || { show_log zookeeper "$d/zookeeper.log"; return 1; }
  wait_ready zookeeper zookeeper_probe "$port" || { show_log zookeeper "$d/zookeeper.log"; return 1; }
}

# zookeeper3: three members on 127.0.0.1 with distinct client, quorum and election ports.
# A member's client port opens at once, but it serves (srvr Mode leader or follower) only
# once a quorum has formed: start_one waits for the port, and start/restart then wait for
# every named member to serve (so all three can be started before anyone waits).
zookeeper3_peers() {
  local q=${DLOCK_ZOOKEEPER3_PEER_PORT:-12381} i
  for i in 1 2 3; do echo "server.$i=127.0.0.1:$((q + i - 1)):$((q + i + 9))"; done
}

zookeeper3_serving() {
  local m; m=$(zookeeper_mode "$1")
  [[ "$m" == leader || "$m" == follower ]]
}

start_zookeeper3() {
  local d=$1 port=$2 n=${1##*-}
  mkdir -p "$d/data"
  echo "$n" >"$d/data/myid"
  { zookeeper_common_cfg "$d" "$port"; echo "initLimit=10"; echo "syncLimit=5"; zookeeper3_peers; } >"$d/zoo.cfg"
  spawn_zookeeper "$d" -Xms64m -Xmx256m
  wait_for_file "$d/pid" || { show_log "zookeeper3-$n" "$d/zookeeper.log"; return 1; }
  wait_ready "zookeeper3-$n" port_open "$port" || { show_log "zookeeper3-$n" "$d/zookeeper.log"; return 1; }
}

stop_zookeeper3() { kill -TERM "$3" 2>/dev/null || true; }

wait_zookeeper3_serving() {  # NAME...: every zookeeper3 member among them serves in time
  local n
  for n in "$@"; do
    [[ "$n" == zookeeper3-* ]] || continue
    wait_ready "$n" zookeeper3_serving "$(recorded_port "$n")" ||
      { show_log "$n" "$(dir_of "$n")/zookeeper.log"; die "$n does not serve (no quorum?)"; }
  done
}

stop_zookeeper() { kill -TERM "$3" 2>/dev/null || true; }  # no admin command; SIGTERM is its clean stop

# ---------------------------------------------------------------- postgres
pg_bin() {
  local b
  for b in /usr/lib/postgresql/*/bin; do [[ -x "$b/pg_ctl" ]] && { echo "$b"; return 0; }; done
  command -v pg_ctl >/dev/null && { dirname "$(command -v pg_ctl)"; return 0; }
  return 1
}

as_postgres() {  # initdb refuses to run as root
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

postgres_probe() { timeout 3 pg_isready -h 127.0.0.1 -p "$1" -t 2; }

start_postgres() {
  local d=$1 port=$2 bin
  bin=$(pg_bin) || { echo "servers.sh: postgres: pg_ctl not found (install postgresql)" >&2; return 1; }
  if [[ $(id -u) -eq 0 ]]; then
    chown postgres: "$d"
    as_postgres test -w "$d" ||
      { echo "servers.sh: postgres: user postgres cannot write $d (is DLOCK_SERVERS_DIR under a private dir?)" >&2; return 1; }
  fi
  if [[ ! -f "$d/data/PG_VERSION" ]]; then
    as_postgres "$bin/initdb" -D "$d/data" -U postgres --auth=trust >"$d/initdb.log" 2>&1 ||
      { show_log postgres "$d/initdb.log"; return 1; }
  fi
  # The postgres backend's tests need one role that must give a password (dlock_pw) and one
  # that pg_hba rejects (dlock_rejected); everyone else is trusted (a loopback test server).
  if ! grep -q '^# dlock tests' "$d/data/pg_hba.conf"; then
    { echo '# dlock tests: first match wins'
      echo 'host all dlock_pw 127.0.0.1/32 scram-sha-256'
      echo 'host all dlock_rejected 127.0.0.1/32 reject'
      cat "$d/data/pg_hba.conf"; } >"$d/pg_hba.new"
    as_postgres cp "$d/pg_hba.new" "$d/data/pg_hba.conf" && rm -f "$d/pg_hba.new"
  fi
  pg_ctl_start postgres "$d" "$port" "$bin"
}

# Starts the postmaster of NAME's data directory and waits until it answers.
pg_ctl_start() {  # NAME DIR PORT BIN [SERVER_OPTIONS]
  local name=$1 d=$2 port=$3 bin=$4 extra=${5:-} stale
  # A postmaster killed with SIGKILL leaves data/postmaster.pid and the socket's lock file
  # behind. Taken for the new server's, postmaster.pid would be read before the new one
  # writes its own (and its dead pid reported as "exited during startup"); while the dead
  # one is an unreaped zombie, postgres itself refuses to start ("lock file already
  # exists": kill(pid, 0) succeeds on a zombie). No live postmaster owns them: remove them.
  local lock
  for lock in "$d/data/postmaster.pid" "$d/.s.PGSQL.$port.lock"; do
    stale=$(head -n1 "$lock" 2>/dev/null | tr -dc 0-9) || true
    if [[ -n "$stale" ]] && ! alive "$stale" postgres; then
      rm -f "$lock"
    fi
  done
  as_postgres "$bin/pg_ctl" -D "$d/data" -l "$d/pg.log" \
    -o "-p $port -k $d -c listen_addresses=127.0.0.1 $extra" -W start </dev/null >"$d/pg_ctl.log" 2>&1 ||
    { show_log "$name" "$d/pg_ctl.log" "$d/pg.log"; return 1; }
  wait_for_file "$d/data/postmaster.pid" || { show_log "$name" "$d/pg_ctl.log" "$d/pg.log"; return 1; }
  head -n1 "$d/data/postmaster.pid" >"$d/pid"
  wait_ready "$name" postgres_probe "$port" || { show_log "$name" "$d/pg_ctl.log" "$d/pg.log"; return 1; }
}

stop_postgres() {
  local bin; bin=$(pg_bin) || return 0
  as_postgres "$bin/pg_ctl" -D "$1/data" -m fast -W stop >/dev/null 2>&1 || true
}

# A read-only hot standby: a base backup of the running `postgres` (pg_basebackup -R writes
# standby.signal and primary_conninfo), streaming from it. initdb's pg_hba.conf trusts
# replication connections from 127.0.0.1, and wal_level=replica is the default.
start_postgres_standby() {
  local d=$1 port=$2 bin primary_port
  bin=$(pg_bin) || { echo "servers.sh: postgres_standby: pg_ctl not found (install postgresql)" >&2; return 1; }
  primary_port=$(recorded_port postgres) && running postgres ||
    { echo "servers.sh: postgres_standby: start postgres first (the standby streams from it)" >&2; return 1; }
  if [[ $(id -u) -eq 0 ]]; then chown postgres: "$d"; fi
  if [[ ! -f "$d/data/PG_VERSION" ]]; then
    rm -rf "$d/data"
    as_postgres "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$d/data" -R -X stream \
      -c fast >"$d/basebackup.log" 2>&1 || { show_log postgres_standby "$d/basebackup.log"; return 1; }
  fi
  pg_ctl_start postgres_standby "$d" "$port" "$bin" "-c hot_standby=on"
}

stop_postgres_standby() { stop_postgres "$@"; }

# ---------------------------------------------------------------- generic
start_one() {
  local name=$1 d port
  d=$(dir_of "$name")
  if running "$name"; then
    say "$name already running (pid $(recorded_pid "$name"), port $(recorded_port "$name"))"
    return 0
  fi
  port=${2:-$(default_port "$name")}
  if ! [[ "$port" =~ ^[0-9]+$ ]] || ((port < 1 || port > 65535)); then
    die "$name: bad port '$port' (set DLOCK_${name^^}_PORT to 1..65535)"
  fi
  if port_open "$port"; then
    die "$name: port $port on 127.0.0.1 is already in use by another process (set DLOCK_${name^^}_PORT)"
  fi
  mkdir -p "$d"
  chmod 755 "$d"
  # Not running: a pid file left by a killed instance must not be read for the new server's
  # (redis writes its own some milliseconds after daemonizing; CI once saw the dead pid and
  # reported "redis exited during startup" while the new redis was ready).
  rm -f "$d/pid"
  local f
  for f in "$d"/*.log; do [[ -f "$f" ]] && mv -f "$f" "$f.prev"; done  # a fresh log per start
  echo "$port" >"$d/port"
  "start_${name%-[123]}" "$d" "$port" || die "$name failed to start (dir $d)"
  say "$name running (pid $(recorded_pid "$name"), port $port, dir $d)"
}

# Waits for PID to vanish; true if it did within SECS.
wait_gone() {  # PID SECS
  local deadline=$((SECONDS + $2))
  while live_pid "$1"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
}

stop_one() {
  local name=$1 d pid port
  d=$(dir_of "$name")
  pid=$(recorded_pid "$name" || true)
  port=$(recorded_port "$name" || true)
  if ! running "$name"; then
    say "$name not running"
    rm -f "$d/pid"
    return 0
  fi
  "stop_${name%-[123]}" "$d" "$port" "$pid"
  if ! wait_gone "$pid" 10; then
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_gone "$pid" "$TIMEOUT"; then
      echo "servers.sh: $name (pid $pid) ignored SIGTERM; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 10 || die "$name (pid $pid) did not exit"
    fi
  fi
  rm -f "$d/pid"
  say "$name stopped"
}

status_one() {
  local name=$1
  if running "$name"; then
    echo "$name: running (pid $(recorded_pid "$name"), port $(recorded_port "$name"), dir $(dir_of "$name"))"
  else
    echo "$name: stopped"
    return 3
  fi
}

env_one() {
  local name=$1 port
  if ! running "$name"; then
    echo "# $name: not running"
    return 0
  fi
  port=$(recorded_port "$name")
  case "$name" in
    redis) echo "export DLOCK_TEST_REDIS_URI=redis://127.0.0.1:$port" ;;
    mariadb)  # the backend is called mysql: both names, one server
      echo "export DLOCK_TEST_MARIADB_URI=mysql://$MARIADB_USER:$MARIADB_PASSWORD@127.0.0.1:$port/$MARIADB_DB"
      echo "export DLOCK_TEST_MYSQL_URI=mysql://$MARIADB_USER:$MARIADB_PASSWORD@127.0.0.1:$port/$MARIADB_DB" ;;
    zookeeper) echo "export DLOCK_TEST_ZOOKEEPER_URI=zk://127.0.0.1:$port" ;;
    zookeeper3-1)  # the ensemble's connect string, once (members 2 and 3 print nothing)
      local i p hosts=""
      for i in 1 2 3; do
        p=$(recorded_port "zookeeper3-$i" || default_port "zookeeper3-$i")
        hosts+="${hosts:+,}127.0.0.1:$p"
      done
      echo "export DLOCK_TEST_ZOOKEEPER3_URI=zk://$hosts" ;;
    postgres) echo "export DLOCK_TEST_POSTGRES_URI=postgres://postgres@127.0.0.1:$port/postgres" ;;
    postgres_standby) echo "export DLOCK_TEST_POSTGRES_STANDBY_URI=postgres://postgres@127.0.0.1:$port/postgres" ;;
  esac
}

# Closes every inherited descriptor above stderr (except bash's own 255), so no server
# keeps a caller's pipe or our lock file open after this script exits.
close_fds() {
  local fd
  for fd in "/proc/$$/fd"/*; do
    fd=${fd##*/}
    if [[ "$fd" =~ ^[0-9]+$ ]] && ((fd > 2 && fd != 255)); then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}

main() {
  (($# >= 1)) || { sed -n '2,/^set -euo/p' "$SCRIPT_PATH" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
  local cmd=$1
  # start/stop/restart run one at a time (tests running in parallel may restart a server):
  # flock holds the lock for the re-executed script, which closes its copy of the descriptor.
  if [[ "$cmd" =~ ^(start|stop|restart)$ && -z "${DLOCK_SERVERS_LOCKED:-}" ]]; then
    mkdir -p "$ROOT"
    local rc=0
    DLOCK_SERVERS_LOCKED=1 flock -w $((TIMEOUT * 4)) -E 75 "$ROOT/.lock" "$SCRIPT_PATH" "$@" || rc=$?
    ((rc != 75)) || echo "servers.sh: timed out waiting for $ROOT/.lock (another servers.sh running?)" >&2
    exit "$rc"
  fi
  close_fds
  shift
  local names=() n
  (($# == 0)) && set -- all
  for n in "$@"; do
    case "$n" in
      all) names+=("${ALL[@]}") ;;
      redis | mariadb | zookeeper | postgres | postgres_standby | zookeeper3-[123]) names+=("$n") ;;
      zookeeper3) names+=(zookeeper3-1 zookeeper3-2 zookeeper3-3) ;;
      *) die "unknown server '$n' (redis|mariadb|zookeeper|postgres|postgres_standby|zookeeper3|zookeeper3-N|all)" ;;
    esac
  done
  mkdir -p "$ROOT"
  chmod 755 "$ROOT" 2>/dev/null || true
  local rc=0 port
  case "$cmd" in
    start)
      for n in "${names[@]}"; do start_one "$n"; done
      wait_zookeeper3_serving "${names[@]}" ;;
    stop) for n in "${names[@]}"; do stop_one "$n"; done ;;
    restart)
      for n in "${names[@]}"; do
        port=$(recorded_port "$n" || true)
        stop_one "$n"
        start_one "$n" "$port"
      done
      wait_zookeeper3_serving "${names[@]}" ;;
    status) for n in "${names[@]}"; do status_one "$n" || rc=3; done ;;
    env)
      for n in "${names[@]}"; do env_one "$n"; done
      echo "export DLOCK_SERVERS_SCRIPT=$SCRIPT_PATH" ;;
    *) die "unknown command '$cmd' (start|stop|restart|status|env)" ;;
  esac
  return "$rc"
}

main "$@"
