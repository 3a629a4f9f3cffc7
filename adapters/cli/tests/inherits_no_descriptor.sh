#!/bin/sh
# `dlock run` must hand CMD exactly the descriptors dlock itself was given: none of the lock
# service's (a client library's socket or pipe is often opened without O_CLOEXEC), which a
# daemonizing CMD would otherwise keep open, and could write into, after dlock is gone.
# Usage: inherits_no_descriptor.sh DLOCK_BINARY URI_VARIABLE [URI_PARAMETER]
# URI_PARAMETER (e.g. restart_grace=0) is added to the URI's query.
set -u
dlock=$1
eval "uri=\${$2:-}"
[ -n "$uri" ] || { echo "$2 is not set (scripts/servers.sh env)" >&2; exit 1; }
if [ -n "${3:-}" ]; then
  case $uri in *\?*) uri="$uri&$3" ;; *) uri="$uri?$3" ;; esac
fi
list='echo /proc/$$/fd/*'  # the shell's own descriptors (its glob's directory one included)
strip() { sed 's|/proc/[0-9]*/fd/||g'; }
expected=$(sh -c "$list" | strip)
got=$("$dlock" run --uri "$uri" inherits-no-descriptor -- sh -c "$list" | strip) || {
  echo "dlock run failed" >&2; exit 1; }
if [ "$got" != "$expected" ]; then
  echo "CMD got descriptors [$got]; dlock was given [$expected]" >&2
  exit 1
fi
echo "CMD got exactly dlock's inherited descriptors: $got"
