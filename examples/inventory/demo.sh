#!/bin/sh
# The inventory example: many processes deduct stock under one lock and never oversell.
#   examples/inventory/demo.sh BUILD_DIR
# Runs WORKERS parallel buyers, each trying PURCHASES times, against STOCK items (default
# 8 x 5 = 40 attempts for 20 items) three ways, on the embedded file:// backend (no server):
#   0. WITHOUT a lock, for comparison (it usually oversells);
#   1. through the command line: dlock run inventory -- sh buy_one.sh …;
#   2. through the C++ API: stock_deduct.
# and reports items sold, orders, stock left, oversold/double-sold items and whether the
# fencing tokens strictly increased. Exits non-zero if a locked run misbehaved.
set -eu

build=${1:?usage: demo.sh BUILD_DIR}
build=$(cd "$build" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
dlock=$build/adapters/cli/dlock
deduct=$build/examples/inventory/stock_deduct
workers=${WORKERS:-8}
purchases=${PURCHASES:-5}
stock=${STOCK:-20}
for f in "$dlock" "$deduct"; do
  [ -x "$f" ] || { echo "demo.sh: $f not built (build the dlock_cli and stock_deduct targets)" >&2; exit 2; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/dlock-inventory.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
# dlock run's default lock service is file:// under $XDG_RUNTIME_DIR/dlock: point it here.
export XDG_RUNTIME_DIR="$tmp"
unset DLOCK_URI
uri="file://$tmp/dlock"
failed=0
# With the lock every attempt before the stock runs out buys exactly one item.
expected=$((workers * purchases < stock ? workers * purchases : stock))

now() { date +%s.%N; }

# run_buyers LABEL REPEAT COMMAND...: WORKERS processes, each running COMMAND STOCK ORDERS
# REPEAT times (the C++ buyer is started once and makes its purchases itself).
run_buyers() {
  label=$1
  repeat=$2
  shift 2
  printf '%s 0\n' "$stock" >"$tmp/stock"
  : >"$tmp/orders"
  : >"$tmp/errors"
  start=$(now)
  w=0
  while [ "$w" -lt "$workers" ]; do
    (
      i=0
      while [ "$i" -lt "$repeat" ]; do
        rc=0
        "$@" "$tmp/stock" "$tmp/orders" 2>>"$tmp/errors" || rc=$?
        [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || echo "exit status $rc" >>"$tmp/errors"
        i=$((i + 1))
      done
    ) &
    w=$((w + 1))
  done
  wait
  end=$(now)
  report "$label" "$start" "$end"
}

# report LABEL START END: what happened to the stock; returns 1 on oversell or a bad token order.
report() {
  sold=$(wc -l <"$tmp/orders")
  left=$(cut -d' ' -f1 "$tmp/stock")
  items=$(awk '{print $5}' "$tmp/orders" | sort -n | uniq | wc -l)
  double=$((sold - items))
  if [ "$sold" -gt "$stock" ] || [ "$double" -ne 0 ] || [ "$((stock - sold))" -ne "$left" ]; then
    oversold=yes
  else
    oversold=no
  fi
  increasing=$(awk '{ if ($7 <= prev) bad = 1; prev = $7 } END { print (bad || NR == 0) ? "no" : "yes" }' "$tmp/orders")
  [ "$(awk '$7 != 0' "$tmp/orders" | wc -l)" -eq 0 ] && increasing="n/a (no lock, no tokens)"
  printf '%s\n' "$1"
  printf '  %d buyers x %d attempts for %d items in %.2fs\n' "$workers" "$purchases" "$stock" \
    "$(awk -v a="$2" -v b="$3" 'BEGIN { print b - a }')"
  printf '  orders written: %d, distinct items sold: %d, double-sold: %d, stock left: %s\n' \
    "$sold" "$items" "$double" "$left"
  printf '  oversold or double-sold: %s; fencing tokens strictly increasing: %s\n' "$oversold" "$increasing"
  [ "$sold" -le "$stock" ] || printf '  %d orders for %d items: oversold by %d\n' "$sold" "$stock" "$((sold - stock))"
  if [ "$sold" -gt 0 ]; then
    printf '  first and last orders:\n'
    { head -2 "$tmp/orders"; echo "..."; tail -1 "$tmp/orders"; } | sed 's/^/    /'
  fi
  if [ -s "$tmp/errors" ]; then
    printf '  errors:\n'
    sed 's/^/    /' "$tmp/errors" | head -5
  fi
}

echo "== 0. WITHOUT a lock (for comparison: read-modify-write races) =="
run_buyers "no lock: sh buy_one.sh" "$purchases" sh "$here/buy_one.sh"
[ "$oversold" = yes ] && echo "  -> without the lock the shop sold what it did not have" \
  || echo "  -> no race this time (it is timing-dependent), but nothing prevented one"
echo

echo "== 1. dlock run inventory -- sh buy_one.sh (command line, default file:// backend) =="
run_buyers "dlock run" "$purchases" "$dlock" run --wait 60s inventory -- sh "$here/buy_one.sh"
if [ "$oversold" = yes ] || [ "$increasing" != yes ] || [ "$sold" -ne "$expected" ] || [ -s "$tmp/errors" ]; then
  echo "  -> FAILED"
  failed=1
fi
echo

echo "== 2. stock_deduct (C++ API, $uri) =="
# One process per buyer doing all its purchases, each under its own acquisition.
run_buyers "C++ stock_deduct" 1 "$deduct" --uri "$uri" --purchases "$purchases" --think 5ms
if [ "$oversold" = yes ] || [ "$increasing" != yes ] || [ "$sold" -ne "$expected" ] || [ -s "$tmp/errors" ]; then
  echo "  -> FAILED"
  failed=1
fi
echo

if [ "$failed" -ne 0 ]; then
  echo "demo: FAILED: a locked run oversold, lost an order or saw tokens out of order"
  exit 1
fi
echo "demo: OK: with the lock, exactly $expected items were sold, each once, with increasing fencing tokens"
