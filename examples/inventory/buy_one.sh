#!/bin/sh
# One purchase of the inventory example, as a shell step. Under `dlock run` it holds the lock
# and gets DLOCK_FENCING_TOKEN; run bare (the no-lock comparison) its token is 0.
#   dlock run inventory -- sh buy_one.sh STOCK_FILE ORDERS_FILE
# STOCK_FILE holds "COUNT LAST_TOKEN"; a write whose token is not above LAST_TOKEN is refused
# (the fencing check a real resource would make). Exit: 0 bought, 3 sold out, 4 stale token.
set -eu
stock_file=$1
orders=$2
token=${DLOCK_FENCING_TOKEN:-0}

read -r count last <"$stock_file"
last=${last:-0}
if [ "$count" -le 0 ]; then
  exit 3
fi
if [ "$token" -ne 0 ] && [ "$token" -le "$last" ]; then
  echo "buy_one: stale token $token <= $last: refused" >&2
  exit 4
fi
sleep 0.005  # the work done while holding the lock (and the window a race needs)
# One rename replaces the file, so no reader sees half a number.
printf '%s %s\n' "$((count - 1))" "$token" >"$stock_file.tmp.$$"
mv -f "$stock_file.tmp.$$" "$stock_file"
printf 'order %s got item %s token %s\n' "$$" "$count" "$token" >>"$orders"
