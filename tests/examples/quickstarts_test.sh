#!/usr/bin/env bash
# The quickstarts as a user runs them, end to end against the real services
# scripts/test.sh started, each with a fresh database (and a fresh SQS queue):
#
#   quickstarts_test.sh kafka <bin>       200 orders -> 200 completed runs, lag 0
#   quickstarts_test.sh sqs_demo <bin>    `demo`: 3 sessions completed, poison in the DLQ
#   quickstarts_test.sh sqs_outage <bin>  the consumer killed (kill -9) and kept down
#                                         longer than the session idle time, then
#                                         restarted: every reading is in some session
#                                         run (entities outlive their runs), none
#                                         dead-lettered
#
# Needs HARVEST_TEST_DATABASE_URL, HARVEST_TEST_KAFKA_BOOTSTRAP,
# HARVEST_TEST_SQS_ENDPOINT (set by scripts/test.sh).
set -euo pipefail

mode=${1:?mode}
BIN=${2:?directory of the example binaries}
WORK=$(mktemp -d)
APP_PID=""

log() { echo "[$mode] $*"; }
die() {
  log "FAIL: $*"
  for f in "$WORK"/*.log; do [[ -s $f ]] && { echo "---- $f"; tail -n 30 "$f"; }; done
  exit 1
}

cleanup() {
  [[ -n $APP_PID ]] && kill -9 "$APP_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# A fresh database for this run.
DB="qs_${mode}_$$_$RANDOM"
psql "$HARVEST_TEST_DATABASE_URL" -qXc "CREATE DATABASE $DB" >/dev/null
export HARVEST_DATABASE_URL="${HARVEST_TEST_DATABASE_URL%/*}/$DB"
export HARVEST_PROFILE=dev
sql() { psql "$HARVEST_DATABASE_URL" -qXtAc "$1"; }

# Polls `cond` (a shell expression) every 200 ms for up to $2 seconds.
wait_for() {
  local cond=$1 secs=$2 i
  for ((i = 0; i < secs * 5; i++)); do
    eval "$cond" && return 0
    [[ -n $APP_PID ]] && ! kill -0 "$APP_PID" 2>/dev/null && die "the app exited"
    sleep 0.2
  done
  return 1
}

# ---- SQS over the AWS JSON protocol (ElasticMQ ignores the signature) ----
AUTH='Authorization: AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date;x-amz-target, Signature=0000'
sqs() {
  curl -sf --max-time 10 -X POST -H 'Content-Type: application/x-amz-json-1.0' \
    -H "X-Amz-Target: AmazonSQS.$1" -H "$AUTH" -d "$2" "$HARVEST_TEST_SQS_ENDPOINT/"
}
json_field() { grep -o "\"$1\" *: *\"[^\"]*\"" | head -n1 | sed 's/.*: *"\(.*\)"/\1/'; }
# Messages visible plus in flight on queue $1.
queue_depth() {
  local out v n
  out=$(sqs GetQueueAttributes "{\"QueueUrl\":\"$1\",\"AttributeNames\":[\"ApproximateNumberOfMessages\",\"ApproximateNumberOfMessagesNotVisible\"]}")
  v=$(json_field ApproximateNumberOfMessages <<<"$out")
  n=$(json_field ApproximateNumberOfMessagesNotVisible <<<"$out")
  echo $((${v:-0} + ${n:-0}))
}
# A fresh queue with a redrive policy to a fresh DLQ (5 receives), as the
# quickstart creates its own.
make_queues() {
  local name="qs-$$-$RANDOM" arn
  DLQ_URL=$(sqs CreateQueue "{\"QueueName\":\"$name-dlq\"}" | json_field QueueUrl)
  arn=$(sqs GetQueueAttributes "{\"QueueUrl\":\"$DLQ_URL\",\"AttributeNames\":[\"QueueArn\"]}" | json_field QueueArn)
  local policy="{\\\"deadLetterTargetArn\\\":\\\"$arn\\\",\\\"maxReceiveCount\\\":\\\"5\\\"}"
  QUEUE_URL=$(sqs CreateQueue "{\"QueueName\":\"$name\",\"Attributes\":{\"RedrivePolicy\":\"$policy\"}}" | json_field QueueUrl)
  [[ -n $QUEUE_URL && -n $DLQ_URL ]] || die "could not create the queues"
  export HARVEST_SQS_QUEUE_URL=$QUEUE_URL AWS_ENDPOINT_URL_SQS=$HARVEST_TEST_SQS_ENDPOINT
}

start_app() {  # start_app <log> <command...>
  local logfile=$1
  shift
  "$@" >"$logfile" 2>&1 &
  APP_PID=$!
}

case $mode in
  kafka)
    export KAFKA_BOOTSTRAP=$HARVEST_TEST_KAFKA_BOOTSTRAP
    "$BIN/kafka_orders_tool" topic >"$WORK/topic.log" 2>&1 || die "topic"
    before=$("$BIN/kafka_orders_tool" lag 2>/dev/null || echo 0)
    [[ $before == 0 ]] || die "the harvest-orders group already owes $before records"
    port=$((20000 + RANDOM % 20000))
    HARVEST_HTTP_PORT=$port start_app "$WORK/app.log" "$BIN/kafka_connector_quickstart"
    "$BIN/kafka_orders_tool" produce 200 >"$WORK/produce.log" 2>&1 || die "produce"
    wait_for '[[ $(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status = '\''completed'\''" 2>/dev/null) == 200 ]]' 60 ||
      die "not every order completed: $(sql "SELECT status, count(*) FROM harvest_workflow_executions GROUP BY 1")"
    wait_for '[[ $("$BIN/kafka_orders_tool" lag 2>/dev/null) == 0 ]]' 30 || die "lag did not reach 0"
    # The plugin serves the HTTP API beside the connector.
    listed=$(curl -sf "http://127.0.0.1:$port/api/harvest/executions?workflow=fulfil_order&status=completed&limit=500") ||
      die "the HTTP API does not answer on $port"
    [[ $(grep -o '"execution_id"' <<<"$listed" | wc -l) == 200 ]] || die "the API lists $(grep -o '"execution_id"' <<<"$listed" | wc -l) completed runs"
    kill -TERM "$APP_PID"
    wait "$APP_PID" || die "the quickstart exited non-zero on SIGTERM"
    APP_PID=""
    [[ $(sql "SELECT count(DISTINCT input->>'order_id') FROM harvest_workflow_executions") == 200 ]] || die "duplicate or missing orders"
    [[ $(sql "SELECT count(*) FROM harvest_workflow_executions WHERE output = to_jsonb('fulfilled ' || (input->>'order_id'))") == 200 ]] || die "outputs"
    log "PASS: 200 records -> 200 completed runs, group lag 0"
    ;;

  sqs_demo)
    make_queues
    "$BIN/sqs_connector_quickstart" demo >"$WORK/demo.log" 2>&1 || die "demo exited non-zero"
    cat "$WORK/demo.log"
    [[ $(grep -c '^device-.*: completed {"max_celsius":.*"readings":3' "$WORK/demo.log") == 3 ]] || die "expected 3 completed sessions of 3 readings"
    grep -q "1 message(s); the poison one was moved there" "$WORK/demo.log" || die "the poison message is not in the DLQ"
    [[ $(queue_depth "$QUEUE_URL") == 0 ]] || die "the queue is not empty"
    log "PASS: 3 sessions of 3 readings, poison redriven to the DLQ"
    ;;

  sqs_outage)
    make_queues
    ID="o$RANDOM"
    "$BIN/sqs_connector_quickstart" send 30 "$ID" >"$WORK/send1.log" 2>&1 || die "send"
    start_app "$WORK/app1.log" "$BIN/sqs_connector_quickstart" run
    wait_for '[[ $(sql "SELECT count(*) FROM harvest_signals" 2>/dev/null) == 30 && $(queue_depth "$QUEUE_URL") == 0 ]]' 60 ||
      die "the first 30 readings were not all delivered"
    kill -9 "$APP_PID"
    wait "$APP_PID" 2>/dev/null || true
    APP_PID=""
    log "killed; down for 5 s (sessions idle out after 3 s)"
    sleep 5
    "$BIN/sqs_connector_quickstart" send 30 "$ID" >"$WORK/send2.log" 2>&1 || die "send"
    start_app "$WORK/app2.log" "$BIN/sqs_connector_quickstart" run
    settled='[[ $(queue_depth "$QUEUE_URL") == 0 && $(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status <> '\''completed'\''") == 0 && $(sql "SELECT coalesce(sum((output->>'\''readings'\'')::int), 0) FROM harvest_workflow_executions") == 60 ]]'
    wait_for "$settled" 60 ||
      die "not settled: $(sql "SELECT workflow_id, run_no, status, output FROM harvest_workflow_executions ORDER BY 1, 2")"
    kill -TERM "$APP_PID"
    wait "$APP_PID" || die "the quickstart exited non-zero on SIGTERM"
    APP_PID=""
    sql "SELECT workflow_id, run_no, status, output->>'readings' FROM harvest_workflow_executions ORDER BY 1, 2"
    [[ $(sql "SELECT count(DISTINCT idempotency_key) FROM harvest_signals") == 60 ]] || die "signals are not 60 distinct readings"
    [[ $(queue_depth "$DLQ_URL") == 0 ]] || die "readings were dead-lettered"
    [[ $(sql "SELECT count(DISTINCT workflow_id) FROM harvest_workflow_executions") == 3 ]] || die "expected 3 devices"
    log "PASS: 60 readings in $(sql "SELECT count(*) FROM harvest_workflow_executions") session runs, 0 dead-lettered"
    ;;

  *)
    die "unknown mode"
    ;;
esac
