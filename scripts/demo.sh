#!/usr/bin/env bash
# The README's first command: the Kafka quickstart end to end.
# Installs what is missing, builds, starts a private PostgreSQL and a local
# Apache Kafka broker, runs examples/kafka_connector_quickstart.cpp, produces
# 1,000 orders, waits until every one is fulfilled, and prints what happened.
# Stops everything it started; with --keep (or HARVEST_DEMO_KEEP=1) it leaves
# the quickstart running until Ctrl-C, so its web console can be explored.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HARVEST_ROOT"

ORDERS="${HARVEST_DEMO_ORDERS:-1000}"
KEEP="${HARVEST_DEMO_KEEP:-0}"
[[ "${1:-}" == "--keep" ]] && KEEP=1
bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

bold "1. install and build"
scripts/setup.sh
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/harvest/ccache}"
# Paths relative to the checkout, so a fresh clone reuses the cache.
export CCACHE_BASEDIR="$HARVEST_ROOT"
# Debug builds hash the build directory by default; a fresh clone would then
# never hit the cache its paths were made relative for.
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake --preset release >/dev/null
cmake --build --preset release --target kafka_connector_quickstart kafka_orders_tool

DEMO_DIR="${HARVEST_DEMO_DIR:-/tmp/harvest-demo-$(id -u)}"
rm -rf "$DEMO_DIR"
mkdir -p "$DEMO_DIR"
chmod 755 "$DEMO_DIR"
export HARVEST_KAFKA_PORT="${HARVEST_KAFKA_PORT:-$(free_port 19092)}"
export HARVEST_KAFKA_DIR="$DEMO_DIR/kafka"
PG_PORT="$(free_port 54329)"
export HARVEST_HTTP_PORT="${HARVEST_HTTP_PORT:-$(free_port 8080)}"
APP_PID=""
cleanup() {
  [[ -n "$APP_PID" ]] && kill "$APP_PID" 2>/dev/null && wait "$APP_PID" 2>/dev/null || true
  scripts/services/kafka.sh stop >/dev/null 2>&1 || true
  stop_pg "$DEMO_DIR/pg"
}
trap cleanup EXIT

bold "2. start a private PostgreSQL and a local Kafka broker"
start_pg "$DEMO_DIR/pg" "$PG_PORT"
psql -q -h 127.0.0.1 -p "$PG_PORT" -U harvest -d postgres -c 'CREATE DATABASE harvest' >/dev/null
export HARVEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$PG_PORT/harvest"
eval "$(scripts/services/kafka.sh start)"
export KAFKA_BOOTSTRAP
echo "PostgreSQL 127.0.0.1:$PG_PORT, Kafka $KAFKA_BOOTSTRAP"
BIN="$HARVEST_ROOT/build/release/examples"
"$BIN/kafka_orders_tool" topic

bold "3. run the quickstart (examples/kafka_connector_quickstart.cpp)"
HARVEST_PROFILE=dev "$BIN/kafka_connector_quickstart" >"$DEMO_DIR/quickstart.log" 2>&1 &
APP_PID=$!
sql() { psql -qtA -h 127.0.0.1 -p "$PG_PORT" -U harvest -d harvest -c "$1" 2>/dev/null || echo 0; }
for _ in $(seq 1 100); do
  [[ "$(sql "SELECT to_regclass('harvest_workflow_executions') IS NOT NULL")" == "t" ]] && break
  kill -0 "$APP_PID" 2>/dev/null || { cat "$DEMO_DIR/quickstart.log"; exit 1; }
  sleep 0.1
done
echo "quickstart running (pid $APP_PID, log $DEMO_DIR/quickstart.log, HTTP API on 127.0.0.1:$HARVEST_HTTP_PORT)"
echo "web console: http://127.0.0.1:$HARVEST_HTTP_PORT/ui/"

bold "4. produce $ORDERS orders to orders.placed"
"$BIN/kafka_orders_tool" produce "$ORDERS"

bold "5. wait until every order is fulfilled"
deadline=$((SECONDS + 180))
while :; do
  done_count="$(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'")"
  printf '\r  fulfilled %s/%s' "$done_count" "$ORDERS"
  [[ "$done_count" -ge "$ORDERS" ]] && break
  if ((SECONDS > deadline)); then
    echo; echo "timed out; last log lines:"; tail -20 "$DEMO_DIR/quickstart.log"; exit 1
  fi
  kill -0 "$APP_PID" 2>/dev/null || { echo; cat "$DEMO_DIR/quickstart.log"; exit 1; }
  sleep 0.5
done
echo

bold "6. result"
lag=""
for _ in $(seq 1 20); do
  lag="$("$BIN/kafka_orders_tool" lag 2>/dev/null || true)"
  [[ "$lag" == "0" ]] && break
  sleep 0.5
done
printf '  %-28s %s\n' \
  "executions started" "$(sql "SELECT count(*) FROM harvest_workflow_executions WHERE start_source = 'broker'")" \
  "executions completed" "$(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'")" \
  "duplicate executions" "$(sql "SELECT count(*) FROM (SELECT workflow_id FROM harvest_workflow_executions GROUP BY workflow_id HAVING count(*) > 1) d")" \
  "dead letters" "$(sql "SELECT count(*) FROM harvest_connector_dead_letters")" \
  "consumer lag (owed)" "${lag:-unavailable}"
echo
echo "  the same runs over the HTTP API (GET /api/harvest/executions?limit=2):"
curl -s "http://127.0.0.1:$HARVEST_HTTP_PORT/api/harvest/executions?limit=2" | head -c 400 | sed 's/^/    /'
echo
echo "  a run traces back to its record:"
sql "SELECT '    ' || workflow_id || '  <-  ' || start_source_ref || '  ' || (output #>> '{}') FROM harvest_workflow_executions ORDER BY workflow_id LIMIT 3"
echo
echo "  the web console (runs, bindings, dead letters): http://127.0.0.1:$HARVEST_HTTP_PORT/ui/"
if [[ $KEEP == 1 ]]; then
  echo "  the quickstart keeps running for the console; Ctrl-C stops everything"
  wait "$APP_PID" || true
else
  echo "  (scripts/demo.sh --keep leaves it running to explore)"
fi
