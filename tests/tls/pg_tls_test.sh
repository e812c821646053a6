#!/usr/bin/env bash
# Issue 34 item 7, PostgreSQL: the unmodified Kafka quickstart against a
# PostgreSQL that demands TLS (hostssl, scram-sha-256) reached with
# sslmode=verify-full and the CA scripts/services/tls.sh generates, changed
# only by its URL; and a wrong CA, an expired server certificate and a wrong
# password each a start-up failure within seconds that names the connection
# and the cause, with no password in its output.
#
#   tests/tls/pg_tls_test.sh BIN_DIR     (ctest: tls.postgres)
set -euo pipefail
BIN=$(cd "${1:?usage: pg_tls_test.sh BIN_DIR}" && pwd)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export HARVEST_TLS_DIR="${TMPDIR:-/tmp}/harvest-tls-test.$$"
OUT="$HARVEST_TLS_DIR.out"
APP=""
cleanup() {
  [[ -n $APP ]] && kill -KILL "$APP" 2>/dev/null
  scripts/services/tls.sh stop >/dev/null 2>&1 || true
  rm -rf "$OUT"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

eval "$(scripts/services/tls.sh start)"
mkdir -p "$OUT"
# The quickstart's database: harvest_tls, owned by the TLS-only user.
DB_URL="${TLS_PG_URL/\/postgres\?//harvest_tls?}"
q() { psql "$DB_URL" -qXtAc "$1"; }
[[ $(q "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == t ]] || fail "psql's own session is not TLS"

# 1. Configuration only: the quickstart over TLS, records in, runs completed.
KAFKA_BOOTSTRAP=$TLS_KAFKA_PLAINTEXT_BOOTSTRAP "$BIN/kafka_orders_tool" produce 50 >/dev/null 2>&1 ||
  fail "could not produce the orders"
HARVEST_PROFILE=dev HARVEST_HTTP_PORT=0 HARVEST_DATABASE_URL=$DB_URL \
  KAFKA_BOOTSTRAP=$TLS_KAFKA_PLAINTEXT_BOOTSTRAP "$BIN/kafka_connector_quickstart" >"$OUT/good.log" 2>&1 &
APP=$!
done_runs=0
for ((i = 0; i < 120; i++)); do
  done_runs=$(q "SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'" 2>/dev/null || echo 0)
  ((done_runs >= 50)) && break
  kill -0 "$APP" 2>/dev/null || { cat "$OUT/good.log" >&2; fail "the quickstart exited over TLS"; }
  sleep 0.5
done
((done_runs == 50)) || fail "$done_runs of 50 runs completed over TLS"
plain=$(q "SELECT count(*) FROM pg_stat_activity a LEFT JOIN pg_stat_ssl s USING (pid)
           WHERE a.datname = 'harvest_tls' AND a.backend_type = 'client backend' AND NOT coalesce(s.ssl, false)")
[[ $plain == 0 ]] || fail "$plain of the app's sessions are not encrypted"
kill -TERM "$APP"
wait "$APP" || fail "the quickstart did not stop cleanly"
APP=""
echo "ok: 50 orders -> 50 completed runs, every session TLS (verify-full)"

# expect_refused NAME URL PATTERN: the quickstart exits non-zero within 30 s
# (no retry loop), naming the host and PATTERN, and no password is printed.
expect_refused() {
  local name=$1 url=$2 pattern=$3 rc=0 log="$OUT/$1.log"
  HARVEST_PROFILE=dev HARVEST_HTTP_PORT=0 HARVEST_DATABASE_URL=$url \
    KAFKA_BOOTSTRAP=$TLS_KAFKA_PLAINTEXT_BOOTSTRAP timeout 30 "$BIN/kafka_connector_quickstart" >"$log" 2>&1 || rc=$?
  ((rc != 0 && rc != 124)) || { cat "$log" >&2; fail "$name: exit status $rc (want a start-up failure, not a hang)"; }
  grep -q "harvest cannot start" "$log" || { cat "$log" >&2; fail "$name: no start-up error"; }
  grep -q "$pattern" "$log" || { cat "$log" >&2; fail "$name: the error does not say '$pattern'"; }
  grep -q '"localhost"' "$log" || { cat "$log" >&2; fail "$name: the error does not name the server"; }
  if grep -qF "$TLS_PG_PASSWORD" "$log" || grep -qF "wrong-$TLS_PG_PASSWORD" "$log"; then
    fail "$name: a password is in the output"
  fi
  echo "ok: $name refused at start-up: $(grep -o "failed: .*" "$log" | head -n 1 | cut -c1-140)"
}
expect_refused wrong_ca "${DB_URL/sslrootcert=$TLS_CA/sslrootcert=$TLS_WRONG_CA}" "certificate verify failed"
expect_refused expired_certificate "${TLS_PG_EXPIRED_URL/\/postgres\?//harvest_tls?}" "certificate verify failed"
expect_refused wrong_password "${DB_URL/:$TLS_PG_PASSWORD@/:wrong-$TLS_PG_PASSWORD@}" "password authentication failed"
echo "PASS"
