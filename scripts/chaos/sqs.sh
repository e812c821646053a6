# The SQS scenario of scripts/chaos.sh (sourced by it, not run).
AUTH='Authorization: AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host;x-amz-date;x-amz-target, Signature=0000'
sqs_call() {
  curl -sf --max-time 10 -X POST -H 'Content-Type: application/x-amz-json-1.0' \
    -H "X-Amz-Target: AmazonSQS.$1" -H "$AUTH" -d "$2" "$SQS_ENDPOINT/"
}
json_field() { grep -o "\"$1\" *: *\"[^\"]*\"" | head -n1 | sed 's/.*: *"\(.*\)"/\1/'; }
queue_attr() {
  sqs_call GetQueueAttributes "{\"QueueUrl\":\"$1\",\"AttributeNames\":[\"$2\"]}" | json_field "$2"
}
# Messages visible plus in flight.
queue_depth() {
  local v n
  v=$(queue_attr "$1" ApproximateNumberOfMessages)
  n=$(queue_attr "$1" ApproximateNumberOfMessagesNotVisible)
  echo $((${v:-0} + ${n:-0}))
}

# A fresh queue redriving to a fresh DLQ after 5 receives, as the quickstart
# creates its own.
sqs_queues() {
  local name="chaos-$SEED-$RANDOM" arn policy
  DLQ_URL=$(sqs_call CreateQueue "{\"QueueName\":\"$name-dlq\"}" | json_field QueueUrl)
  arn=$(queue_attr "$DLQ_URL" QueueArn)
  policy="{\\\"deadLetterTargetArn\\\":\\\"$arn\\\",\\\"maxReceiveCount\\\":\\\"5\\\"}"
  QUEUE_URL=$(sqs_call CreateQueue "{\"QueueName\":\"$name\",\"Attributes\":{\"RedrivePolicy\":\"$policy\"}}" | json_field QueueUrl)
  [[ -n $QUEUE_URL && -n $DLQ_URL ]]
  export HARVEST_SQS_QUEUE_URL=$QUEUE_URL
}

# sqs_produce SECONDS: SQS_RECORDS readings in batches of 30 (each batch for
# three devices of its own) plus $POISON undecodable messages, spread over
# about SECONDS, in the background.
sqs_produce() {
  local secs=$1 batches i poison_at=()
  batches=$(((SQS_RECORDS + 29) / 30))
  for ((i = 0; i < POISON; i++)); do poison_at+=($((RANDOM % batches))); done
  local pause
  pause=$(awk -v s="$secs" -v b="$batches" 'BEGIN { printf "%.2f", s / b }')
  (
    for ((b = 0; b < batches; b++)); do
      n=$((SQS_RECORDS - b * 30 < 30 ? SQS_RECORDS - b * 30 : 30))
      "$BIN/sqs_connector_quickstart" send "$n" "s$b" >>"$LOGS/$SCENARIO.producer.log" 2>&1 || exit 1
      for p in "${poison_at[@]}"; do
        if ((p == b)); then
          sqs_call SendMessage "{\"QueueUrl\":\"$QUEUE_URL\",\"MessageBody\":\"this is not JSON $b\"}" >/dev/null || exit 1
        fi
      done
      sleep "$pause"
    done
  ) &
  PRODUCER=$!
  BG_PIDS+=("$PRODUCER")
}

sqs_signals() { sql "SELECT count(*) FROM harvest_signals"; }
sqs_settled() {
  [[ $(queue_depth "$QUEUE_URL") == 0 ]] &&
    [[ $(queue_attr "$DLQ_URL" ApproximateNumberOfMessages) == "$POISON" ]] &&
    [[ $(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status <> 'completed'") == 0 ]] &&
    [[ $(sql "SELECT coalesce(sum((output->>'readings')::int), 0) FROM harvest_workflow_executions") -ge $SQS_RECORDS ]]
}

sqs_app() { start_app app -- "$BIN/sqs_connector_quickstart" run; }

# Readings are signals to per-device session runs: each message must be
# exactly one signal (its key derives from the SQS message id) and counted
# exactly once by a completed session.
scenario_sqs() {
  local k t producer_rc=0 depth rows keys readings not_completed dlq dl_table dup lost result=PASS
  ensure_sqs
  fresh_database
  sqs_queues
  sqs_app
  sqs_produce $((SQS_KILLS * 4 + SQS_PAUSE_S + 10))
  for ((k = 1; k <= SQS_KILLS; k++)); do
    sleep "$(rand_s 1 4)"
    kill9_app app
    log "kill $k/$SQS_KILLS (its in-flight messages come back after the 60 s visibility timeout)"
    sleep "$(rand_s 0 1.5)"
    sqs_app
    t=$(now)
    note_resume "$(await_progress "$t" sqs_signals "$SQS_RECORDS")"
  done
  sleep "$(rand_s 1 3)"
  log "SIGSTOP for ${SQS_PAUSE_S}s"
  kill -STOP "${APPS[app]}"
  sleep "$SQS_PAUSE_S"
  kill -CONT "${APPS[app]}"
  t=$(now)
  note_resume "$(await_progress "$t" sqs_signals "$SQS_RECORDS")"
  wait "$PRODUCER" || producer_rc=$?
  ((producer_rc == 0)) || { log "the producer failed ($producer_rc)"; UNEXPECTED+=(producer); }
  wait_settled sqs_settled 150 || log "not settled after 150 s"
  stop_app app
  depth=$(queue_depth "$QUEUE_URL")
  rows=$(sql "SELECT count(*) FROM harvest_signals")
  keys=$(sql "SELECT count(DISTINCT idempotency_key) FROM harvest_signals")
  readings=$(sql "SELECT coalesce(sum((output->>'readings')::int), 0) FROM harvest_workflow_executions")
  not_completed=$(sql "SELECT count(*) FROM harvest_workflow_executions WHERE status <> 'completed'")
  dlq=$(queue_attr "$DLQ_URL" ApproximateNumberOfMessages)
  dl_table=$(sql "SELECT count(*) FROM harvest_connector_dead_letters")
  log "signals=$rows distinct_keys=$keys readings_in_sessions=$readings queue_depth=$depth dlq=$dlq"
  dup=$((rows - keys + (readings > SQS_RECORDS ? readings - SQS_RECORDS : 0)))
  lost=$((SQS_RECORDS - (keys < readings ? keys : readings)))
  ((lost < 0)) && lost=0
  ((dup == 0 && lost == 0 && keys == SQS_RECORDS && dlq + dl_table == POISON)) || result=FAIL
  [[ $depth == 0 ]] || { log "the queue still holds $depth messages"; result=FAIL; }
  [[ $not_completed == 0 ]] || { log "$not_completed session runs not completed"; result=FAIL; }
  finish_line "$SQS_RECORDS" "$(sql "SELECT count(*) FROM harvest_workflow_executions")" "$dup" "$lost" \
    "$((dlq + dl_table))" "$result"
}

