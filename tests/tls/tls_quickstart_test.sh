#!/usr/bin/env bash
# Encrypted, authenticated connections: the unmodified Kafka quickstart
# against a PostgreSQL that demands TLS (hostssl, scram-sha-256), reached
# with sslmode=verify-full, and a Kafka broker listener that demands
# SASL_SSL, with the CA scripts/services/tls.sh generates, changed by
# configuration only (the database URL; a client properties file in
# HARVEST_KAFKA_PROPERTIES_FILE). A wrong CA, an expired server certificate
# and a wrong password, on either connection, are each a start-up failure
# within seconds that names the server and the cause, with no password in the
# output. And the SQS quickstart over HTTPS (ElasticMQ behind a TLS
# terminator) with the CA in AWS_CA_BUNDLE; a wrong CA or an expired
# certificate refused at start-up.
#
# SASL mechanism SCRAM-SHA-512, against Kafka 3.9.0: Debian's librdkafka 2.0.2
# cannot complete SCRAM with Kafka 3.9.1 or 4.x (fixed in librdkafka 2.6.1),
# see tls.sh.
#
#   tests/tls/tls_quickstart_test.sh BIN_DIR     (ctest: tls.quickstart)
set -euo pipefail
BIN=$(cd "${1:?usage: tls_quickstart_test.sh BIN_DIR}" && pwd)
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
# await_count SQL N LOG WHAT: polls SQL (up to 60 s) until it reaches N and
# leaves the last value in COUNT; fails, showing LOG, if the app ($APP) exits.
await_count() {
  local i
  COUNT=0
  for ((i = 0; i < 120; i++)); do
    COUNT=$(q "$1" 2>/dev/null || echo 0)
    ((COUNT >= $2)) && return 0
    kill -0 "$APP" 2>/dev/null || { cat "$3" >&2; fail "$4 exited"; }
    sleep 0.5
  done
}
[[ $(q "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()") == t ]] || fail "psql's own session is not TLS"

# 1. Configuration only: the quickstart over TLS, records in, runs completed.
KAFKA_BOOTSTRAP=$TLS_KAFKA_PLAINTEXT_BOOTSTRAP "$BIN/kafka_orders_tool" produce 50 >/dev/null 2>&1 ||
  fail "could not produce the orders"
# kafka_properties FILE CA PASSWORD: the client properties a managed Kafka hands out.
kafka_properties() {
  cat >"$1" <<PROPS
# SASL_SSL with a private CA
security.protocol=SASL_SSL
sasl.mechanisms=$TLS_KAFKA_MECHANISM
sasl.username=$TLS_KAFKA_USER
sasl.password=$3
ssl.ca.location=$2
PROPS
}
kafka_properties "$OUT/kafka.properties" "$TLS_CA" "$TLS_KAFKA_PASSWORD"
HARVEST_PROFILE=dev HARVEST_HTTP_PORT=0 HARVEST_DATABASE_URL=$DB_URL KAFKA_BOOTSTRAP=$TLS_KAFKA_BOOTSTRAP \
  HARVEST_KAFKA_PROPERTIES_FILE="$OUT/kafka.properties" \
  "$BIN/kafka_connector_quickstart" >"$OUT/good.log" 2>&1 &
APP=$!
await_count "SELECT count(*) FROM harvest_workflow_executions WHERE status = 'completed'" 50 \
  "$OUT/good.log" "the quickstart over TLS"
((COUNT == 50)) || fail "$COUNT of 50 runs completed over TLS"
plain=$(q "SELECT count(*) FROM pg_stat_activity a LEFT JOIN pg_stat_ssl s USING (pid)
           WHERE a.datname = 'harvest_tls' AND a.backend_type = 'client backend' AND NOT coalesce(s.ssl, false)")
[[ $plain == 0 ]] || fail "$plain of the app's sessions are not encrypted"
kill -TERM "$APP"
wait "$APP" || fail "the quickstart did not stop cleanly"
APP=""
echo "ok: 50 orders -> 50 completed runs, Kafka over SASL_SSL, every PostgreSQL session TLS (verify-full)"

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
expect_refused pg_wrong_ca "${DB_URL/sslrootcert=$TLS_CA/sslrootcert=$TLS_WRONG_CA}" "certificate verify failed"
expect_refused pg_expired_certificate "${TLS_PG_EXPIRED_URL/\/postgres\?//harvest_tls?}" "certificate verify failed"
expect_refused pg_wrong_password "${DB_URL/:$TLS_PG_PASSWORD@/:wrong-$TLS_PG_PASSWORD@}" "password authentication failed"

# kafka_refused NAME BOOTSTRAP CA PASSWORD PATTERN: as expect_refused, for the
# broker connection (the database one is good).
kafka_refused() {
  local name=$1 bootstrap=$2 rc=0 log="$OUT/$1.log" t0=$SECONDS
  kafka_properties "$OUT/$name.properties" "$3" "$4"
  HARVEST_PROFILE=dev HARVEST_HTTP_PORT=0 HARVEST_DATABASE_URL=$DB_URL KAFKA_BOOTSTRAP=$bootstrap \
    HARVEST_KAFKA_PROPERTIES_FILE="$OUT/$name.properties" \
    timeout 30 "$BIN/kafka_connector_quickstart" >"$log" 2>&1 || rc=$?
  ((rc != 0 && rc != 124)) || { cat "$log" >&2; fail "$name: exit status $rc (want a start-up failure, not a retry loop)"; }
  grep -q "refused the connection" "$log" || { cat "$log" >&2; fail "$name: no start-up error"; }
  grep -q "$5" "$log" || { cat "$log" >&2; fail "$name: the error does not say '$5'"; }
  grep -qF "$bootstrap" "$log" || { cat "$log" >&2; fail "$name: the error does not name the brokers"; }
  if grep -qF "$TLS_KAFKA_PASSWORD" "$log" || grep -qF "$4" "$log"; then
    fail "$name: a password is in the output"
  fi
  echo "ok: $name refused at start-up after $((SECONDS - t0)) s: $(grep -o "refused the connection ([^)]*" "$log" | head -n 1 | cut -c1-150)"
}
kafka_refused kafka_wrong_ca "$TLS_KAFKA_BOOTSTRAP" "$TLS_WRONG_CA" "$TLS_KAFKA_PASSWORD" "certificate verify failed"
kafka_refused kafka_expired_certificate "$TLS_KAFKA_EXPIRED_BOOTSTRAP" "$TLS_CA" "$TLS_KAFKA_PASSWORD" "certificate verify failed"
kafka_refused kafka_wrong_password "$TLS_KAFKA_BOOTSTRAP" "$TLS_CA" "wrong-$TLS_KAFKA_PASSWORD" "authentication"
# SQS over HTTPS: readings sent and received through the terminator, each a
# signal to a device session run.
# ElasticMQ accepts any signature; a region and keys are still configuration.
export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local
sqs_env=(AWS_ENDPOINT_URL_SQS="$TLS_SQS_ENDPOINT" AWS_CA_BUNDLE="$TLS_CA" HARVEST_DATABASE_URL="$DB_URL"
  HARVEST_HTTP_PORT=0)
env "${sqs_env[@]}" "$BIN/sqs_connector_quickstart" send 30 tls >"$OUT/sqs-send.log" 2>&1 ||
  { cat "$OUT/sqs-send.log" >&2; fail "sending over HTTPS"; }
env "${sqs_env[@]}" "$BIN/sqs_connector_quickstart" run >"$OUT/sqs-run.log" 2>&1 &
APP=$!
await_count "SELECT count(*) FROM harvest_signals" 30 "$OUT/sqs-run.log" "the SQS quickstart over HTTPS"
((COUNT == 30)) || fail "$COUNT of 30 SQS readings became signals over HTTPS"
kill -TERM "$APP"
wait "$APP" || fail "the SQS quickstart did not stop cleanly"
APP=""
echo "ok: 30 SQS readings over HTTPS (AWS_CA_BUNDLE) -> 30 signals"

# sqs_refused NAME ENDPOINT CA PATTERN
sqs_refused() {
  local name=$1 rc=0 log="$OUT/$1.log"
  AWS_ENDPOINT_URL_SQS="$2" AWS_CA_BUNDLE="$3" HARVEST_DATABASE_URL="$DB_URL" HARVEST_HTTP_PORT=0 \
    timeout 30 "$BIN/sqs_connector_quickstart" run >"$log" 2>&1 || rc=$?
  ((rc != 0 && rc != 124)) || { cat "$log" >&2; fail "$name: exit status $rc (want a start-up failure, not a retry loop)"; }
  grep -q "$4" "$log" || { cat "$log" >&2; fail "$name: the error does not say '$4'"; }
  grep -qF "${2#https://}" "$log" || { cat "$log" >&2; fail "$name: the error does not name the endpoint"; }
  echo "ok: $name refused at start-up: $(grep -o "SSL[^)]*" "$log" | head -n 1 | cut -c1-120)"
}
sqs_refused sqs_wrong_ca "$TLS_SQS_ENDPOINT" "$TLS_WRONG_CA" "certificate"
sqs_refused sqs_expired_certificate "$TLS_SQS_EXPIRED_ENDPOINT" "$TLS_CA" "certificate has expired"
echo "PASS"
