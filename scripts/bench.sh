#!/usr/bin/env bash
# Benchmarks (not tests): builds a release tree, starts a private PostgreSQL,
# Kafka and SQS server, runs every case, stops them, and ends its output with
# one machine-readable line per case:
#   RESULT case=<name> msgs_per_s=<x> ceiling_msgs_per_s=<y> ratio=<x/y> p50_ms=<> p99_ms=<> rss_mib=<>
#          wal_bytes_per_msg=<> rows_per_msg=<> cpu_us_per_msg=<>
# Cases: kafka_ceiling, kafka_start, kafka_complete, sqs_loop, sqs_start,
# engine_complete, kafka_backlog_1m. Each verifies its own counts (executions
# in PostgreSQL, committed offsets on the broker) and fails loudly when they
# are off. The last three figures (every case that writes to PostgreSQL) do
# not move with the machine's load: WAL bytes (pg_current_wal_lsn), table
# rows inserted + updated + deleted (pg_stat_user_tables) and CPU time of the
# bench process plus every PostgreSQL process (/proc), each per message,
# over the case (bench/support/footprint.hpp).
#
#   scripts/bench.sh [--durable-pg]
# Env: N (records per Kafka case, default 20000), SQS_N (default 5000),
#      BACKLOG (default 1000000; 0 skips the backlog case).
# --durable-pg: PostgreSQL with fsync, synchronous_commit and
# full_page_writes on (the test cluster turns them off).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HARVEST_ROOT"

DURABLE=0
for arg in "$@"; do
  case "$arg" in
    --durable-pg) DURABLE=1 ;;
    *) echo "bench: unknown argument '$arg' (known: --durable-pg)" >&2; exit 2 ;;
  esac
done
N="${N:-20000}"
SQS_N="${SQS_N:-5000}"
BACKLOG="${BACKLOG:-1000000}"

scripts/setup.sh
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/harvest/ccache}"
export CCACHE_BASEDIR="$HARVEST_ROOT"
cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHARVEST_TESTS=OFF \
  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
cmake --build build/bench --target bench_kafka_end_to_end bench_sqs_start bench_engine_complete

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
AWS_ENDPOINT_URL_SQS="$SQS_ENDPOINT" run build/bench/bench/bench_sqs_start "$SQS_N"
run build/bench/bench/bench_engine_complete "$N"
if ((BACKLOG > 0)); then
  KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" run build/bench/bench/bench_kafka_end_to_end --backlog "$BACKLOG"
fi
echo
grep '^RESULT ' "$OUT"
