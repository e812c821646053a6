#!/usr/bin/env bash
# Benchmarks (not tests): builds a release tree, starts a private PostgreSQL,
# Kafka and SQS server, runs every case, stops them, and ends its output with
# one machine-readable line per case:
#   RESULT case=<name> msgs_per_s=<x> ceiling_msgs_per_s=<y> ratio=<x/y> p50_ms=<> p99_ms=<> rss_mib=<>
#          wal_bytes_per_msg=<> rows_per_msg=<> cpu_us_per_msg=<>
# Cases: kafka_ceiling, kafka_start, kafka_complete, sqs_loop, sqs_start,
# engine_complete, quickstart_complete, kafka_backlog_1m. Each verifies its own counts (executions
# in PostgreSQL, committed offsets on the broker) and fails loudly when they
# are off. The last three figures (every case that writes to PostgreSQL) do
# not move with the machine's load: WAL bytes (pg_current_wal_lsn), table
# rows inserted + updated + deleted (pg_stat_user_tables) and CPU time of the
# bench process plus every PostgreSQL process (/proc), each per message,
# over the case (bench/support/footprint.hpp). The row counters reach
# pg_stat_user_tables asynchronously and can under-read (docs/performance.md).
#
#   scripts/bench.sh [--durable-pg] [--pgbouncer]
# Env: N (records per Kafka case, default 20000), SQS_N (default 5000),
#      BACKLOG (default 1000000; 0 skips the backlog case),
#      QUICKSTART (default 1; 0 skips quickstart_complete).
# --durable-pg: PostgreSQL with fsync, synchronous_commit and
# full_page_writes on (the test cluster turns them off).
# --pgbouncer: also runs kafka_start and kafka_complete through PgBouncer in
# transaction pooling (HARVEST_DATABASE_POOLER=transaction), as
# kafka_start_pgbouncer and kafka_complete_pgbouncer against the same run's
# ceiling, and prints the pooler's own CPU per record (pgbouncer_cpu_us_per_msg).
# --console: only the web console's queries over 1,000,000 runs and 100,000
# connector dead letters (bench/console_queries.cpp; EXECUTIONS and
# DEAD_LETTERS change the sizes): one RESULT case=console_<query> line per
# request the pages make, with its p50 and max in ms (target: <= 50 ms).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HARVEST_ROOT"

DURABLE=0
PGBOUNCER=0
CONSOLE=0
for arg in "$@"; do
  case "$arg" in
    --durable-pg) DURABLE=1 ;;
    --pgbouncer) PGBOUNCER=1 ;;
    --console) CONSOLE=1 ;;
    *) echo "bench: unknown argument '$arg' (known: --durable-pg, --pgbouncer, --console)" >&2; exit 2 ;;
  esac
done

if ((CONSOLE)); then
  scripts/setup.sh
  export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/harvest/ccache}"
  export CCACHE_BASEDIR="$HARVEST_ROOT"
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHARVEST_TESTS=OFF \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build build/bench --target bench_console_queries
  STATE="$(mktemp -d /tmp/harvest-bench.XXXXXX)"
  chmod 755 "$STATE"
  trap 'stop_pg "$STATE/pg"; rm -rf "$STATE"' EXIT
  PG_PORT="$(free_port 56432)"
  start_pg "$STATE/pg" "$PG_PORT"
  "$(pg_bin psql)" -h 127.0.0.1 -p "$PG_PORT" -U harvest -d postgres -qAtc "CREATE DATABASE console"
  HARVEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$PG_PORT/console" \
    build/bench/bench/bench_console_queries 2>&1 | grep -v ' info \[harvest\]'
  exit 0
fi
N="${N:-20000}"
SQS_N="${SQS_N:-5000}"
BACKLOG="${BACKLOG:-1000000}"

scripts/setup.sh
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/harvest/ccache}"
export CCACHE_BASEDIR="$HARVEST_ROOT"
# Debug builds hash the build directory by default; a fresh clone would then
# never hit the cache its paths were made relative for.
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHARVEST_TESTS=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build/bench --target bench_kafka_end_to_end bench_sqs_start bench_engine_complete \
  kafka_connector_quickstart kafka_orders_tool harvest

STATE="$(mktemp -d /tmp/harvest-bench.XXXXXX)"
chmod 755 "$STATE"
PG_DIR="$STATE/pg"
STARTED=()
cleanup() {
  for svc in "${STARTED[@]}"; do scripts/services/$svc.sh stop >/dev/null 2>&1 || true; done
  stop_pg "$PG_DIR"
  rm -rf "$STATE"
}
trap cleanup EXIT

PG_PORT="$(free_port 56432)"
start_pg "$PG_DIR" "$PG_PORT"
if ((DURABLE)); then
  # The same cluster restarted without the test cluster's -c overrides:
  # PostgreSQL's durable defaults.
  stop_pg "$PG_DIR"
  as_pg "$(pg_bin pg_ctl)" -D "$PG_DIR" -w -t 60 -l "$PG_DIR/server.log" \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=300" start >/dev/null
fi
psql_bench() { "$(pg_bin psql)" -h 127.0.0.1 -p "$PG_PORT" -U harvest -d postgres -qAtc "$1"; }
psql_bench "CREATE DATABASE bench" >/dev/null
echo "bench: PostgreSQL on 127.0.0.1:$PG_PORT (fsync=$(psql_bench 'SHOW fsync'))"
export HARVEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$PG_PORT/bench"

export HARVEST_KAFKA_PORT="$(free_port 29092)"
STARTED+=(kafka)
eval "$(scripts/services/kafka.sh start)"
export HARVEST_SQS_PORT="$(free_port 29324)"
STARTED+=(sqs)
eval "$(scripts/services/sqs.sh start)"

OUT="$STATE/out.txt"
run() { "$@" 2>&1 | grep -v ' info \[harvest\]' | tee -a "$OUT"; }
KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" run build/bench/bench/bench_kafka_end_to_end "$N"
if ((PGBOUNCER)); then
  # The same two drains through PgBouncer (transaction pooling, 32 server
  # connections for the bench's 72 client ones), against this run's ceiling,
  # on a database of their own (the direct start cases leave runs pending).
  psql_bench "CREATE DATABASE bench_pooled" >/dev/null
  export HARVEST_PG_PORT="$PG_PORT"
  export HARVEST_PGBOUNCER_PORT="$(free_port 26432)"
  export HARVEST_PGBOUNCER_POOL=32
  STARTED+=(pgbouncer)
  eval "$(scripts/services/pgbouncer.sh start)"
  bouncer_pid="$(cat "/tmp/harvest-pgbouncer-$PGBOUNCER_PORT/pgbouncer.pid")"
  ceiling="$(sed -n 's/^RESULT case=kafka_ceiling msgs_per_s=\([0-9]*\).*/\1/p' "$OUT")"
  for only in complete start; do
    b0="$(awk '{ print $14 + $15 }' "/proc/$bouncer_pid/stat")"
    HARVEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$PGBOUNCER_PORT/bench_pooled" \
      HARVEST_DATABASE_POOLER=transaction BENCH_ONLY="$only" BENCH_CASE_SUFFIX=_pgbouncer \
      BENCH_CEILING="${ceiling:-0}" KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" \
      run build/bench/bench/bench_kafka_end_to_end "$N"
    b1="$(awk '{ print $14 + $15 }' "/proc/$bouncer_pid/stat")"
    awk -v t="$((b1 - b0))" -v hz="$(getconf CLK_TCK)" -v n="$N" -v c="$only" 'BEGIN {
      printf "bench: kafka_%s_pgbouncer pgbouncer_cpu_us_per_msg=%.1f (not in cpu_us_per_msg)\n", c, t * 1e6 / hz / n
    }' | tee -a "$OUT"
  done
fi
AWS_ENDPOINT_URL_SQS="$SQS_ENDPOINT" run build/bench/bench/bench_sqs_start "$SQS_N"
run build/bench/bench/bench_engine_complete "$N"

# quickstart_complete: the unmodified Kafka quickstart binary, as the demo
# runs it, drains N pre-filled orders to completion. Its schema is applied
# first (harvest migrate) so the figures hold only the drain. The rate runs
# from the first execution created to the last one completed, as PostgreSQL
# stamped them; CPU is the quickstart process plus every PostgreSQL process.
# postmaster (with the backends it reaped) + live backends, in clock ticks
pg_cpu_ticks() {
  local pm
  pm="$(head -1 "$PG_DIR/postmaster.pid")"
  cat /proc/[0-9]*/stat 2>/dev/null |
    awk -v pm="$pm" '$1 == pm { s += $14 + $15 + $16 + $17 } $4 == pm { s += $14 + $15 } END { print s + 0 }'
}
if [[ "${QUICKSTART:-1}" == 1 ]]; then
  psql_bench "CREATE DATABASE quickstart" >/dev/null
  QS_URL="postgresql://harvest@127.0.0.1:$PG_PORT/quickstart"
  qs_sql() { "$(pg_bin psql)" "$QS_URL" -qAtc "$1"; }
  HARVEST_DATABASE_URL="$QS_URL" build/bench/src/harvest/cli/harvest migrate >"$STATE/migrate.log" 2>&1 ||
    { cat "$STATE/migrate.log"; exit 1; }
  EX=build/bench/examples
  KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" "$EX/kafka_orders_tool" topic >/dev/null 2>&1
  KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" "$EX/kafka_orders_tool" produce "$N" >/dev/null 2>&1
  sleep 2  # the migrations' row counters reach pg_stat_user_tables
  rows0="$(qs_sql "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables")"
  wal0="$(psql_bench "SELECT pg_current_wal_lsn()")"
  pg0="$(pg_cpu_ticks)"
  HARVEST_DATABASE_URL="$QS_URL" HARVEST_PROFILE=dev KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" \
    HARVEST_HTTP_PORT="$(free_port 18080)" "$EX/kafka_connector_quickstart" >"$STATE/quickstart.log" 2>&1 &
  QS_PID=$!
  deadline=$((SECONDS + 300))
  until [[ "$(qs_sql "SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'")" -ge "$N" ]]; do
    if ((SECONDS > deadline)) || ! kill -0 "$QS_PID" 2>/dev/null; then
      tail -20 "$STATE/quickstart.log"
      echo "bench: quickstart_complete did not complete $N runs" >&2
      exit 1
    fi
    sleep 0.2
  done
  qs_ticks="$(awk '{ print $14 + $15 }' "/proc/$QS_PID/stat")"
  qs_rss="$(awk '/^VmHWM:/ { print $2 / 1024 }' "/proc/$QS_PID/status")"
  pg1="$(pg_cpu_ticks)"
  wal="$(psql_bench "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$wal0')")"
  kill "$QS_PID"
  wait "$QS_PID" || true
  sleep 2  # the quickstart's last row counters reach pg_stat_user_tables
  rows1="$(qs_sql "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM pg_stat_user_tables")"
  secs="$(qs_sql "SELECT extract(epoch FROM max(completed_at) - min(created_at)) FROM harvest_workflow_executions")"
  started="$(qs_sql "SELECT count(*) FROM harvest_workflow_executions")"
  [[ "$started" == "$N" ]] || { echo "bench: $started executions for $N orders" >&2; exit 1; }
  ceiling="$(sed -n 's/^RESULT case=kafka_ceiling msgs_per_s=\([0-9]*\).*/\1/p' "$OUT")"
  awk -v n="$N" -v secs="$secs" -v c="${ceiling:-0}" -v wal="$wal" -v rows="$((rows1 - rows0))" \
    -v ticks="$((qs_ticks + pg1 - pg0))" -v hz="$(getconf CLK_TCK)" -v rss="$qs_rss" 'BEGIN {
      rate = n / secs
      printf "RESULT case=quickstart_complete msgs_per_s=%.0f ceiling_msgs_per_s=%.0f ratio=%.3f p50_ms=na p99_ms=na rss_mib=%.1f wal_bytes_per_msg=%.0f rows_per_msg=%.2f cpu_us_per_msg=%.1f\n",
        rate, c, (c > 0 ? rate / c : 0), rss, wal / n, rows / n, ticks * 1e6 / hz / n
    }' | tee -a "$OUT"
fi
if ((BACKLOG > 0)); then
  KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" run build/bench/bench/bench_kafka_end_to_end --backlog "$BACKLOG"
fi
echo
grep '^RESULT ' "$OUT"
