#!/usr/bin/env bash
# Installs dependencies, builds (preset `dev`: ASan + UBSan, warnings as
# errors), starts a throw-away PostgreSQL cluster and runs every test.
# Extra arguments go to ctest:  scripts/test.sh -L postgres   scripts/test.sh -R signal
# Environment: HARVEST_PRESET (default dev), HARVEST_TEST_JOBS (default 2),
# HARVEST_TSAN=0 skips the ThreadSanitizer pass of a full run.
# Each pass prints how long it took (`test: pass NAME took N s`); the run
# ends with a table of the passes and `test: total Ns`, also when a pass
# fails (the failed one is marked).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$HARVEST_ROOT"

RUN_START=$SECONDS
PASS_NAMES=()
PASS_SECONDS=()
PASS_NAME=""
PASS_START=0
pass_begin() {
  PASS_NAME="$1"
  PASS_START=$SECONDS
}
pass_end() {
  local took=$((SECONDS - PASS_START))
  PASS_NAMES+=("$PASS_NAME")
  PASS_SECONDS+=("$took")
  echo "test: pass $PASS_NAME took $took s"
  PASS_NAME=""
}
# Printed from the EXIT trap: every pass that completed, the one under way
# if the run stopped in it, and the total. Nothing here can fail.
timing_summary() {
  local i
  echo "test: time per pass (s)"
  for i in "${!PASS_NAMES[@]}"; do
    printf 'test:   %-16s %6d\n' "${PASS_NAMES[$i]}" "${PASS_SECONDS[$i]}"
  done
  if [[ -n $PASS_NAME ]]; then
    printf 'test:   %-16s %6d  (did not complete)\n' "$PASS_NAME" $((SECONDS - PASS_START))
  fi
  echo "test: total $((SECONDS - RUN_START))s"
}
trap timing_summary EXIT

pass_begin setup
scripts/setup.sh
pass_end

PRESET="${HARVEST_PRESET:-dev}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/harvest/ccache}"
# Paths relative to the checkout, so a fresh clone reuses the cache.
export CCACHE_BASEDIR="$HARVEST_ROOT"
# Debug builds hash the build directory by default; a fresh clone would then
# never hit the cache its paths were made relative for.
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
pass_begin "$PRESET-build"
cmake --preset "$PRESET" >/dev/null
cmake --build --preset "$PRESET"
pass_end

STATE="$(mktemp -d /tmp/harvest-test.XXXXXX)"
chmod 755 "$STATE"
PG_DIR="$STATE/pg"
STARTED_SERVICES=()
cleanup() {
  for svc in "${STARTED_SERVICES[@]}"; do scripts/services/$svc.sh stop >/dev/null 2>&1 || true; done
  stop_pg "$PG_DIR"
  rm -rf "$STATE"
}
trap 'cleanup; timing_summary' EXIT

pass_begin services
PG_PORT="$(free_port 55432)"
start_pg "$PG_DIR" "$PG_PORT"
export HARVEST_TEST_DATABASE_URL="postgresql://harvest@127.0.0.1:$PG_PORT/postgres"
echo "test: PostgreSQL on 127.0.0.1:$PG_PORT"

# PgBouncer in transaction pooling in front of it, for the tests that run
# harvest through a pooler (label pooler).
if ctest --test-dir "build/$PRESET" -N -L pooler 2>/dev/null | grep -q 'Total Tests: [1-9]'; then
  export HARVEST_PG_PORT="$PG_PORT"
  export HARVEST_PGBOUNCER_PORT="${HARVEST_PGBOUNCER_PORT:-$(free_port 16432)}"
  STARTED_SERVICES+=(pgbouncer)
  eval "$(scripts/services/pgbouncer.sh start)"
  export HARVEST_TEST_PGBOUNCER_URL="postgresql://harvest@127.0.0.1:$PGBOUNCER_PORT/postgres"
  echo "test: PgBouncer (transaction pooling) on 127.0.0.1:$PGBOUNCER_PORT"
fi

# Broker services, started only when this build has tests that use them.
if ctest --test-dir "build/$PRESET" -N -L kafka 2>/dev/null | grep -q 'Total Tests: [1-9]'; then
  export HARVEST_KAFKA_PORT="${HARVEST_KAFKA_PORT:-$(free_port 19092)}"
  STARTED_SERVICES+=(kafka)
  eval "$(scripts/services/kafka.sh start)"
  export HARVEST_TEST_KAFKA_BOOTSTRAP="$KAFKA_BOOTSTRAP"
  echo "test: Kafka on $KAFKA_BOOTSTRAP"
fi
if ctest --test-dir "build/$PRESET" -N -L sqs 2>/dev/null | grep -q 'Total Tests: [1-9]'; then
  export HARVEST_SQS_PORT="${HARVEST_SQS_PORT:-$(free_port 19324)}"
  STARTED_SERVICES+=(sqs)
  eval "$(scripts/services/sqs.sh start)"
  export HARVEST_TEST_SQS_ENDPOINT="$SQS_ENDPOINT"
  echo "test: SQS on $SQS_ENDPOINT"
fi

pass_end

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
pass_begin "$PRESET-tests"
ctest --test-dir "build/$PRESET" --output-on-failure -j "${HARVEST_TEST_JOBS:-2}" "$@"
pass_end

# A full run also runs the postgres suite, and the Kafka and SQS connector
# suites, a second time with every engine a test opens (directly or through
# the plugin) reaching PostgreSQL through PgBouncer in transaction pooling
# (LISTEN on the direct URL), as a deployment behind a pooler does (issues
# 34 and 48).
if [[ $# -eq 0 && -n "${HARVEST_TEST_PGBOUNCER_URL:-}" ]]; then
  echo "test: the postgres, Kafka connector and SQS connector suites through PgBouncer (transaction pooling)"
  pass_begin pooler
  HARVEST_TEST_THROUGH_POOLER="$HARVEST_TEST_PGBOUNCER_URL" \
    ctest --test-dir "build/$PRESET" --output-on-failure -j "${HARVEST_TEST_JOBS:-2}" -L '^postgres$'
  if [[ -n "${HARVEST_TEST_KAFKA_BOOTSTRAP:-}" || -n "${HARVEST_TEST_SQS_ENDPOINT:-}" ]]; then
    HARVEST_TEST_THROUGH_POOLER="$HARVEST_TEST_PGBOUNCER_URL" \
      ctest --test-dir "build/$PRESET" --output-on-failure -j "${HARVEST_TEST_JOBS:-2}" \
      -R '^(KafkaConnectorTest|KafkaCollisionTest|SqsConnectorTest|SqsCustodyTest)\.'
  fi
  pass_end
fi

# A full run also builds the core alone (HARVEST_KAFKA=OFF, HARVEST_SQS=OFF:
# the engine, the connector runtime and MockSource, as a user without a
# broker client links it) and runs its connector and plugin tests.
if [[ $# -eq 0 && "${HARVEST_CORE_BUILD:-1}" == 1 ]]; then
  echo "test: the core build (no broker clients)"
  pass_begin core-build
  cmake --preset core >/dev/null
  cmake --build --preset core
  pass_end
  pass_begin core-tests
  ctest --test-dir build/core --output-on-failure -j "${HARVEST_TEST_JOBS:-2}" \
    -R 'ConnectorTest|Plugin|MockSource|BindingRules|CommitTracker|DedupeKey|StrikeCounter'
  pass_end

  # Installed, it is consumed as a user would: find_package and pkg-config.
  echo "test: install into a fresh prefix and build examples/consumer against it"
  pass_begin install-checks
  PREFIX="$STATE/prefix"
  cmake --install build/core --prefix "$PREFIX" >/dev/null
  "$PREFIX/bin/harvest" --version | grep -q '^harvest [0-9]'
  cmake -S examples/consumer -B "$STATE/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null
  cmake --build "$STATE/consumer" >/dev/null
  psql "$HARVEST_TEST_DATABASE_URL" -qXc "CREATE DATABASE harvest_consumer" >/dev/null
  HARVEST_DATABASE_URL="${HARVEST_TEST_DATABASE_URL%/*}/harvest_consumer" "$STATE/consumer/consumer" |
    tee "$STATE/consumer.out"
  grep -q "dispatched 1 message; committed offset 1" "$STATE/consumer.out"
  # shellcheck disable=SC2046
  c++ examples/consumer/main.cpp -o "$STATE/consumer-pc" \
    $(PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig" pkg-config --cflags --libs harvest)
  "$STATE/consumer-pc" | grep -q "^linked"
  echo "test: installed package consumed through CMake and pkg-config"
  scripts/check_headers.sh "$PREFIX"
  # The full build installs the broker modules' public headers too (kafka/,
  # sqs/, api/); each compiles alone, so none reaches an internal header.
  cmake --install "build/$PRESET" --prefix "$STATE/prefix-full" >/dev/null
  scripts/check_headers.sh "$STATE/prefix-full"
  # The API reference builds with no warning (every supported member documented).
  scripts/apidocs.sh "$STATE/apidocs"
  pass_end
fi

# A full run also runs the unit, postgres, kafka and sqs labels under
# ThreadSanitizer (preset `tsan`): any data race fails the run
# (halt_on_error). The property and fuzz tests run there too, at a tenth of
# their size (kFuzzDivisor), and so do the tests that SIGSTOP the broker,
# with their margins stretched (kSanitizerSlowdown). The soak, chaos and
# example labels stay on the dev build only, which keeps the whole run inside
# its CI budget.
if [[ $# -eq 0 && "${HARVEST_TSAN:-1}" == 1 ]]; then
  echo "test: ThreadSanitizer (labels unit, postgres, pooler, kafka, sqs, fuzz at a tenth)"
  pass_begin tsan-build
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan
  pass_end
  pass_begin tsan-tests
  TSAN_OPTIONS="halt_on_error=1 abort_on_error=0 exitcode=66 second_deadlock_stack=1 suppressions=$HARVEST_ROOT/tests/tsan.supp" \
    ctest --test-dir build/tsan --output-on-failure -j "${HARVEST_TEST_JOBS:-2}" \
    -L 'unit|postgres|pooler|kafka|sqs' -LE 'soak|chaos|examples'
  pass_end
fi
