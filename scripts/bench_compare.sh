#!/usr/bin/env bash
# One drain case of two trees, alternated on one PostgreSQL and one broker
# (a benchmark, not a test): the working tree against an earlier commit,
# run old/new/new/old/old/new so drift on a shared machine falls on both.
#
#   scripts/bench_compare.sh REV [start|complete]
# Env: N (records per drain, default 20000).
# Each run prints its RESULT line (bench/kafka_end_to_end.cpp, BENCH_ONLY)
# with case kafka_<case>_before (REV) or kafka_<case>_after (this tree);
# each tree drains into a database of its own, so each applies only the
# migrations it knows.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HARVEST_ROOT"
REV="${1:?usage: bench_compare.sh REV [start|complete]}"
CASE="${2:-start}"
N="${N:-20000}"
scripts/setup.sh >/dev/null
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/harvest/ccache}" CCACHE_NOHASHDIR=1
STATE="$(mktemp -d /tmp/harvest-compare.XXXXXX)"
chmod 755 "$STATE"
git worktree add -f --detach "$STATE/before" "$REV" >/dev/null
cleanup() {
  scripts/services/kafka.sh stop >/dev/null 2>&1 || true
  stop_pg "$STATE/pg"
  git worktree remove --force "$STATE/before" >/dev/null 2>&1 || true
  rm -rf "$STATE"
}
trap cleanup EXIT
for tree in "$STATE/before" "$HARVEST_ROOT"; do
  (cd "$tree" && export CCACHE_BASEDIR="$tree" &&
    cmake -S . -B build/bench -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHARVEST_TESTS=OFF \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null &&
    cmake --build build/bench --target bench_kafka_end_to_end >/dev/null)
done
PG_PORT="$(free_port 56432)"
start_pg "$STATE/pg" "$PG_PORT"
for db in before_db after_db; do
  "$(pg_bin psql)" -h 127.0.0.1 -p "$PG_PORT" -U harvest -d postgres -qAtc "CREATE DATABASE $db"
done
export HARVEST_KAFKA_PORT="$(free_port 29092)"
eval "$(scripts/services/kafka.sh start)"
for which in before after after before before after; do
  tree="$HARVEST_ROOT"
  [[ $which == before ]] && tree="$STATE/before"
  HARVEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$PG_PORT/${which}_db" BENCH_ONLY="$CASE" \
    BENCH_CASE_SUFFIX="_$which" KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP" \
    "$tree/build/bench/bench/bench_kafka_end_to_end" "$N" 2>&1 | grep '^RESULT'
done
